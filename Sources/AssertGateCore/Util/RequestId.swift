/// The `X-Request-Id` rule of protocol.md §6: a client id is kept when it is
/// 1–128 characters of `A-Z a-z 0-9 . _ ~ : -`, otherwise a fresh UUID is used.
public enum RequestId {
    public static let maxLength = 128

    public static func isValid<S: StringProtocol>(_ candidate: S) -> Bool {
        let utf8 = candidate.utf8
        guard !utf8.isEmpty, utf8.count <= maxLength else { return false }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: ":"), UInt8(ascii: "-"):
                continue
            default:
                return false
            }
        }
        return true
    }

    /// The client's id when well formed, else a new one.
    public static func resolve(_ clientValue: String?) -> String {
        if let clientValue, isValid(clientValue) { return clientValue }
        return generate()
    }

    /// A random (version 4) UUID in lower-case canonical form.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in stride(from: 0, to: 16, by: 8) {
            let word = rng.next() as UInt64
            for j in 0..<8 { bytes[i + j] = UInt8(truncatingIfNeeded: word >> (8 * j)) }
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
