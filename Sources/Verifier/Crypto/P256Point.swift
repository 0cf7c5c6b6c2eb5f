import COpenSSL

/// Helpers for raw P-256 points (`04‖X‖Y`, 65 bytes).
enum P256Point {
    static let length = 65
    static let groupName = "prime256v1"

    /// Reads an EC key's point as fixed 32-byte coordinates, so a coordinate
    /// with leading zero bytes still yields a 65-byte point; nil unless P-256.
    static func uncompressed(of key: OpaquePointer) -> [UInt8]? {
        defer { OpenSSLErrors.clear() }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else { return nil }
        var name = [CChar](repeating: 0, count: 64)
        var nameLength = 0
        let ok = name.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_utf8_string_param(key, "group", $0.baseAddress, $0.count, &nameLength)
        }
        guard ok == 1, nameLength > 0, nameLength < name.count else { return nil }
        let group = String(decoding: name[0..<nameLength].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard group == groupName else { return nil }
        guard let x = coordinate(key, "qx"), let y = coordinate(key, "qy") else { return nil }
        return [0x04] + x + y
    }

    private static func coordinate(_ key: OpaquePointer, _ name: String) -> [UInt8]? {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, name, &bn) == 1, let bn else { return nil }
        defer { BN_free(bn) }
        var out = [UInt8](repeating: 0, count: 32)
        let written = out.withUnsafeMutableBufferPointer { BN_bn2binpad(bn, $0.baseAddress, 32) }
        return written == 32 ? out : nil
    }

    /// A well-formed uncompressed point encoding (not yet checked on-curve).
    static func isUncompressedEncoding(_ point: [UInt8]) -> Bool {
        point.count == length && point[0] == 0x04
    }
}
