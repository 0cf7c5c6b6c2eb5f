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
    /// The attestation's signals (risk.md §1, §6.14): assertions never change them.
    public var appVersion: String?
    public var launchCategory: UInt32?
    public var keyPolicy: KeyPolicy?

    public init(
        keyId: [UInt8], appId: String, environment: AppEnvironment, counter: UInt32, publicKey: [UInt8],
        userId: String?, createdAt: Int64, revoked: Bool, riskMetric: Int?, riskMetricAt: Int64?,
        appVersion: String? = nil, launchCategory: UInt32? = nil, keyPolicy: KeyPolicy? = nil
    ) {
        self.appVersion = appVersion
        self.launchCategory = launchCategory
        self.keyPolicy = keyPolicy
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

extension KeyRecord {
    /// The §7 JSON object: ids and key as b64url, times as RFC 3339, absent
    /// optional members left out.
    public var adminJSON: String {
        var members: [(String, String)] = [
            ("keyId", JSONText.quoted(Base64.encodeURL(keyId))),
            ("appId", JSONText.quoted(appId)),
            ("environment", JSONText.quoted(environment.rawValue)),
            ("counter", String(counter)),
            ("publicKey", JSONText.quoted(Base64.encodeURL(publicKey))),
        ]
        if let userId { members.append(("userId", JSONText.quoted(userId))) }
        members.append(("createdAt", JSONText.quoted(RFC3339.format(unixSeconds: createdAt))))
        members.append(("revoked", revoked ? "true" : "false"))
        if let riskMetric { members.append(("riskMetric", String(riskMetric))) }
        if let riskMetricAt { members.append(("riskMetricAt", JSONText.quoted(RFC3339.format(unixSeconds: riskMetricAt)))) }
        if let appVersion { members.append(("appVersion", JSONText.quoted(appVersion))) }
        if let launchCategory { members.append(("launchCategory", String(launchCategory))) }
        if let keyPolicy { members.append(("keyPolicy", JSONText.quoted(keyPolicy.rawValue))) }
        return JSONText.object(members)
    }
}
