import Verifier
import NIOCore

/// The admin key endpoints of protocol.md §7 on top of the store, and reload
/// through the closure the server wires in (the same path as SIGHUP).
public struct StoreAdminActions: AdminActions {
    private let stores: any StoreProvider
    private let loop: any EventLoop
    private let reloadAction: @Sendable () async -> Result<Void, AdminReloadError>

    public init(
        stores: any StoreProvider, loop: any EventLoop,
        reload: @escaping @Sendable () async -> Result<Void, AdminReloadError>
    ) {
        self.stores = stores
        self.loop = loop
        self.reloadAction = reload
    }

    public func keyRecord(keyId: String) async throws -> KeyRecord? {
        let id = try KeyIdCodec.decode(keyId, reason: .malformedRequest)
        return try await stores.store(for: loop).keyRecord(keyId: id).get()
    }

    public func revoke(keyId: String) async throws -> KeyRecord? {
        let id = try KeyIdCodec.decode(keyId, reason: .malformedRequest)
        return try await stores.store(for: loop).revokeKey(keyId: id).get()
    }

    public func userKeys(userId: String) async throws -> [KeyRecord]? {
        try await stores.store(for: loop).userKeys(userId: userId).get()
    }

    public func revokeUser(userId: String) async throws -> [KeyRecord]? {
        try await stores.store(for: loop).revokeUser(userId: userId).get()
    }

    public func reload() async -> Result<Void, AdminReloadError> {
        await reloadAction()
    }
}
