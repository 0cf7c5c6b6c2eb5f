/// `apple_validation_category_01` (risk.md §1): Apple's `ValidationCategory`
/// as a number, with the names the gateway writes in headers, rules and
/// metrics. The number is authoritative; unknown numbers are written in decimal.
public enum LaunchCategory {
    /// Value → name, Apple's table (risk.md §1).
    public static let names: [UInt32: String] = [
        0: "invalid", 1: "platform", 2: "testflight", 3: "development", 4: "app-store", 5: "enterprise",
        6: "developer-id", 7: "local-signing", 8: "rosetta", 9: "oop-jit", 10: "none",
    ]

    /// Name → value.
    public static let values: [String: UInt32] = Dictionary(uniqueKeysWithValues: names.map { ($1, $0) })

    /// The name of `value`, or its decimal form when unnamed.
    public static func name(_ value: UInt32) -> String {
        names[value] ?? String(value)
    }

    /// A byte string of exactly 4 bytes (little-endian UInt32), or a CBOR
    /// unsigned integer that fits in 32 bits; nil for anything else.
    public static func decode(_ value: CBORValue) -> UInt32? {
        switch value {
        case .bytes(let b):
            guard b.count == 4 else { return nil }
            return UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
        case .unsigned(let n):
            return UInt32(exactly: n)
        default:
            return nil
        }
    }

    /// The 4-byte little-endian form.
    public static func bytes(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xff), UInt8(value >> 8 & 0xff), UInt8(value >> 16 & 0xff), UInt8(value >> 24)]
    }
}
