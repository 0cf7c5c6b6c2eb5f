import AssertGateCore
import COpenSSL
import Verifier

/// Device tokens the mock accepts, standing in for the opaque base64 blobs
/// of `DCDevice.generateToken()`: base64 of
///
///     "AGDT" ‖ 0x01 ‖ nonce (16) ‖ n (1) ‖ device name (n bytes, 1…64) ‖ HMAC-SHA256(secret, all before) (32)
///
/// The mock keys bits by the device name, so every token of one device sees
/// the same bits; the nonce makes each token different, like Apple's; the
/// MAC (compared in constant time) tells tokens made with the mock's secret
/// from forged or damaged ones.
public enum MockDeviceToken {
    /// The secret of `assertgate-device device-token` and `apple-mock` when
    /// neither is given another: a test stand-in, not a secret.
    public static let defaultSecret: [UInt8] = Array("assertgate-apple-mock-device-tokens".utf8)
    static let magic: [UInt8] = Array("AGDT".utf8) + [0x01]
    static let nonceLength = 16
    static let macLength = 32
    public static let maxDeviceLength = 64
    /// Longest base64 text a token can be.
    static let maxEncodedLength = Base64.encodedLength(ofAtMost: 5 + 16 + 1 + 64 + 32)

    public enum MakeError: Error, CustomStringConvertible {
        case badDeviceName

        public var description: String { "device name must be 1 to \(MockDeviceToken.maxDeviceLength) bytes of UTF-8" }
    }

    /// A new token for `device` (a fresh random nonce each time).
    public static func make(device: String, secret: [UInt8] = defaultSecret) throws(MakeError) -> String {
        let name = Array(device.utf8)
        guard !name.isEmpty, name.count <= maxDeviceLength else { throw .badDeviceName }
        var rng = SystemRandomNumberGenerator()
        let nonce = (0..<nonceLength).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
        let body = magic + nonce + [UInt8(name.count)] + name
        return Base64.encode(body + Digest.hmacSHA256(key: secret, message: body))
    }

    /// The device a token names, or nil for anything not made with `secret`.
    public static func device(in token: String, secret: [UInt8] = defaultSecret) -> String? {
        guard token.utf8.count <= maxEncodedLength, let bytes = try? Base64.decode(token) else { return nil }
        let fixed = magic.count + nonceLength + 1
        guard bytes.count > fixed + macLength, Array(bytes.prefix(magic.count)) == magic else { return nil }
        let n = Int(bytes[fixed - 1])
        guard n >= 1, n <= maxDeviceLength, bytes.count == fixed + n + macLength else { return nil }
        let body = Array(bytes.prefix(fixed + n))
        let mac = Array(bytes.suffix(macLength))
        guard constantTimeEqual(mac, Digest.hmacSHA256(key: secret, message: body)) else { return nil }
        return String(validating: body.suffix(n), as: UTF8.self)
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count, !a.isEmpty else { return false }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CAssertGate_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }
}
