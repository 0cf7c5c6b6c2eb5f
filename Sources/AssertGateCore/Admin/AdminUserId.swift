import AssertGateRedis

/// The `{userId}` path component of the user routes: percent-encoded UTF-8,
/// 1–256 bytes once decoded (the attest request's limit).
enum AdminUserId {
    static let maxBytes = 256

    static func decode(pathComponent: Substring) -> String? {
        guard !pathComponent.isEmpty, pathComponent.utf8.count <= 3 * maxBytes else { return nil }
        guard let decoded = RedisURL.percentDecode(pathComponent), !decoded.isEmpty,
            decoded.utf8.count <= maxBytes
        else { return nil }
        return decoded
    }
}
