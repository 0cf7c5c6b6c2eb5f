import AssertGateRedis

/// The `{keyId}` path component of the admin routes: b64url, or standard
/// base64 percent-encoded (`%2B`, `%2F`, `%3D`), decoding to 32 bytes.
enum AdminKeyId {
    static func canonical(pathComponent: Substring) -> String? {
        guard !pathComponent.isEmpty, pathComponent.utf8.count <= 160 else { return nil }
        guard let decoded = RedisURL.percentDecode(pathComponent) else { return nil }
        guard let bytes = try? KeyIdCodec.decode(decoded, reason: .malformedRequest) else { return nil }
        return KeyIdCodec.encode(bytes)
    }
}
