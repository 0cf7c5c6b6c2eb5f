import Foundation
import Testing
import Verifier

/// Locates the real App Attest test data: `$ASSERTGATE_VECTORS`, else the
/// repository's own copy, `<package root>/Tests/Vectors`. Absent data fails
/// the test loudly.
enum Vectors {
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    static var directory: URL {
        get throws {
            if let env = ProcessInfo.processInfo.environment["ASSERTGATE_VECTORS"], !env.isEmpty {
                return try existing(URL(fileURLWithPath: env), how: "ASSERTGATE_VECTORS")
            }
            // #filePath = <root>/Tests/VerifierTests/Support/Vectors.swift
            let root = URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent()
            return try existing(
                root.appendingPathComponent("Tests/Vectors"), how: "<package root>/Tests/Vectors")
        }
    }

    private static func existing(_ url: URL, how: String) throws -> URL {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            let message =
                "App Attest test vectors not found at \(url.path) (from \(how)); set ASSERTGATE_VECTORS to the vectors directory"
            Issue.record(Comment(rawValue: message))
            throw Missing(description: message)
        }
        return url
    }

    static func url(_ relative: String) throws -> URL {
        try directory.appendingPathComponent(relative)
    }

    static func data(_ relative: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: url(relative)))
    }

    static func text(_ relative: String) throws -> String {
        String(decoding: try data(relative), as: UTF8.self)
    }

    static func json(_ relative: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(data(relative)))
    }

    /// Base64 in either alphabet, whitespace ignored.
    static func base64(_ text: String) throws -> [UInt8] {
        try Base64.decode(String(text.filter { !$0.isWhitespace }))
    }

    static func hex(_ text: String) throws -> [UInt8] {
        guard let bytes = Hex.decode(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw Missing(description: "bad hex")
        }
        return bytes
    }

    static func time(_ rfc3339: String) throws -> Int64 {
        guard let t = RFC3339Time(rfc3339) else { throw Missing(description: "bad time \(rfc3339)") }
        return t.unixSeconds
    }

    static func sha256(_ text: String) -> [UInt8] { SHA256.hash(Array(text.utf8)) }
}

/// `#expect` that `body` throws a VerificationError with `reason`.
func expectReason(
    _ reason: ReasonToken, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws(VerificationError) -> Void
) {
    do {
        try body()
        Issue.record("expected \(reason.rawValue), but verification succeeded", sourceLocation: sourceLocation)
    } catch {
        #expect(error.reason == reason, "\(error)", sourceLocation: sourceLocation)
    }
}
