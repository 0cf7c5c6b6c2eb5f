import Foundation

/// Base64 forms of protocol.md's notation.
public enum Base64Text {
    /// Standard alphabet with padding (`b64`).
    public static func standard(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// URL-safe alphabet without padding (`b64url`).
    public static func url(_ bytes: [UInt8]) -> String {
        String(standard(bytes).compactMap { c -> Character? in
            switch c {
            case "+": "-"
            case "/": "_"
            case "=": nil
            default: c
            }
        })
    }

    /// Decodes either alphabet, with or without padding; nil when not base64.
    public static func decode(_ text: String) -> [UInt8]? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map { [UInt8]($0) }
    }
}
