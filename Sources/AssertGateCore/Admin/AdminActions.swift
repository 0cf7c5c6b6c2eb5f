/// What the admin listener needs from the rest of the gateway; the store and
/// the reload machinery are wired in by whoever starts the server.
public protocol AdminActions: Sendable {
    /// The key record, or nil when the key is unknown (`404 unknown-key`).
    /// `keyId` is the canonical unpadded b64url of the 32-byte key id.
    func keyRecord(keyId: String) async throws -> KeyRecord?
    /// Marks the key revoked and returns the updated record, or nil when unknown.
    func revoke(keyId: String) async throws -> KeyRecord?
    /// Same as SIGHUP: load and validate the file, swap it in, keep the old one on failure.
    func reload() async -> Result<Void, AdminReloadError>
    /// The records of every key attested with `userId`, or nil when none was (`404 unknown-user`).
    func userKeys(userId: String) async throws -> [KeyRecord]?
    /// Revokes every key of `userId`; the records after revocation, or nil when unknown.
    func revokeUser(userId: String) async throws -> [KeyRecord]?
}

extension AdminActions {
    /// Actions without user endpoints (test doubles): every user is unknown.
    public func userKeys(userId: String) async throws -> [KeyRecord]? { nil }
    public func revokeUser(userId: String) async throws -> [KeyRecord]? { nil }
}

/// A failed reload; `message` is shown to the operator (config errors, one per line).
public struct AdminReloadError: Error, Sendable, Equatable {
    public var message: String
    public init(message: String) { self.message = message }
}
