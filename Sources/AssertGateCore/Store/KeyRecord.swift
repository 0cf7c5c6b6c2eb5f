import Verifier

/// The admin view of a key (protocol.md §7), without secrets or the receipt.
public struct KeyRecord: Sendable, Equatable {
    public var keyId: [UInt8]
    public var appId: String
    public var environment: AppEnvironment
    public var counter: UInt32
    public var publicKey: [UInt8]
    public var userId: String?
    /// Unix seconds.
    public var createdAt: Int64
    public var revoked: Bool
    public var riskMetric: Int?
    /// Unix seconds.
    public var riskMetricAt: Int64?

    public init(
        keyId: [UInt8], appId: String, environment: AppEnvironment, counter: UInt32, publicKey: [UInt8],
        userId: String?, createdAt: Int64, revoked: Bool, riskMetric: Int?, riskMetricAt: Int64?
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
}

extension AdminKeyRecord {
    /// The §7 admin view of a stored record: ids and key as b64url.
    public init(_ r: KeyRecord) {
        self.init(
            keyId: Base64.encodeURL(r.keyId), appId: r.appId, environment: r.environment.rawValue,
            counter: UInt64(r.counter), publicKey: Base64.encodeURL(r.publicKey), userId: r.userId,
            createdAt: r.createdAt, revoked: r.revoked, riskMetric: r.riskMetric, riskMetricAt: r.riskMetricAt)
    }
}
