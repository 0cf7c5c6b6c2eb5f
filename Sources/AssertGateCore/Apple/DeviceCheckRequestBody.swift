/// The JSON body of a DeviceCheck call: `device_token` (the app's base64
/// token), `transaction_id` (unique per call), `timestamp` (milliseconds
/// since the epoch), and on update `bit0` / `bit1` as JSON booleans (either
/// may be left out: Apple keeps that bit).
struct DeviceCheckRequestBody: Sendable, Equatable {
    /// Real tokens are a few KiB of base64; anything far larger is not one.
    static let maxDeviceTokenLength = 16 * 1024

    var deviceToken: String
    var transactionId: String
    var timestampMillis: Int64
    var bit0: Bool?
    var bit1: Bool?

    /// Whether `token` can be sent at all: standard base64 (Apple's tokens
    /// are `Data.base64EncodedString()`), not empty, not huge. Anything else
    /// is refused without asking Apple.
    static func isSendable(_ token: String) -> Bool {
        let bytes = token.utf8
        guard !bytes.isEmpty, bytes.count <= maxDeviceTokenLength else { return false }
        return bytes.allSatisfy { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2B || b == 0x2F
                || b == 0x3D
        }
    }

    var json: [UInt8] {
        var fields: [(String, String)] = [
            ("device_token", JSONText.quoted(deviceToken)),
            ("transaction_id", JSONText.quoted(transactionId)),
            ("timestamp", String(timestampMillis)),
        ]
        if let bit0 { fields.append(("bit0", bit0 ? "true" : "false")) }
        if let bit1 { fields.append(("bit1", bit1 ? "true" : "false")) }
        return Array(JSONText.object(fields).utf8)
    }
}
