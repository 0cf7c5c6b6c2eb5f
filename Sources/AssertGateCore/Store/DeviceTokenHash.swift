/// H(device token), the name under which a DeviceCheck token's first use is
/// recorded (risk.md §3): SHA-256, so the token itself is never stored.
enum DeviceTokenHash {
    static let length = 32

    static func check(_ hash: [UInt8]) throws {
        guard hash.count == length else {
            throw StoreError.invalidArgument("device token hash must be \(length) bytes")
        }
    }
}
