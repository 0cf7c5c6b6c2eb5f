/// What the admin listener needs from the rest of the gateway; the store and
/// the reload machinery are wired in by whoever starts the server.
public protocol AdminActions: Sendable {
    /// The key record, or nil when the key is unknown (`404 unknown-key`).
    /// `keyId` is the canonical unpadded b64url of the 32-byte key id.
    func keyRecord(keyId: String) async throws -> AdminKeyRecord?
    /// Marks the key revoked and returns the updated record, or nil when unknown.
    func revoke(keyId: String) async throws -> AdminKeyRecord?
    /// Same as SIGHUP: load and validate the file, swap it in, keep the old one on failure.
    func reload() async -> Result<Void, AdminReloadError>
}

/// A failed reload; `message` is shown to the operator (config errors, one per line).
public struct AdminReloadError: Error, Sendable, Equatable {
    public var message: String
    public init(message: String) { self.message = message }
}

/// protocol.md §7 key record. Carries no secrets.
public struct AdminKeyRecord: Sendable, Equatable {
    public var keyId: String
    public var appId: String
    public var environment: String
    public var counter: UInt64
    /// b64url of the 65-byte X9.62 point.
    public var publicKey: String
    public var userId: String?
    /// Unix seconds; rendered as RFC 3339.
    public var createdAt: Int64
    public var revoked: Bool
    public var riskMetric: Int?
    /// Unix seconds of the receipt refresh that gave `riskMetric`.
    public var riskMetricAt: Int64?

    public init(
        keyId: String, appId: String, environment: String, counter: UInt64, publicKey: String, userId: String? = nil,
        createdAt: Int64, revoked: Bool, riskMetric: Int? = nil, riskMetricAt: Int64? = nil
    ) {
        self.keyId = keyId
        self.appId = appId
        self.environment = environment
        self.counter = counter
        self.publicKey = publicKey
        self.userId = userId
        self.createdAt = createdAt
        self.revoked = revoked
        self.riskMetric = riskMetric
        self.riskMetricAt = riskMetricAt
    }

    public var json: String {
        var members: [(String, String)] = [
            ("keyId", JSONText.quoted(keyId)),
            ("appId", JSONText.quoted(appId)),
            ("environment", JSONText.quoted(environment)),
            ("counter", String(counter)),
            ("publicKey", JSONText.quoted(publicKey)),
        ]
        if let userId { members.append(("userId", JSONText.quoted(userId))) }
        members.append(("createdAt", JSONText.quoted(RFC3339.format(unixSeconds: createdAt))))
        members.append(("revoked", revoked ? "true" : "false"))
        if let riskMetric { members.append(("riskMetric", String(riskMetric))) }
        if let riskMetricAt { members.append(("riskMetricAt", JSONText.quoted(RFC3339.format(unixSeconds: riskMetricAt)))) }
        return JSONText.object(members)
    }
}
