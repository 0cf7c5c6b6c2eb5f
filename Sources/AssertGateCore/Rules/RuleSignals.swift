import Verifier

/// What the rules judge (risk.md §1), for one verified request.
public struct RuleSignals: Sendable, Equatable {
    public var environment: AppEnvironment
    /// The assertion's, else the attestation's.
    public var appVersion: String?
    public var launchCategory: UInt32?
    public var keyPolicy: KeyPolicy?
    /// Keys of the key's user; nil for a key attested without a userId.
    public var userKeys: Int?
    /// The last refreshed receipt's metric; nil before the first refresh.
    public var riskMetric: Int?

    public init(
        environment: AppEnvironment, appVersion: String? = nil, launchCategory: UInt32? = nil,
        keyPolicy: KeyPolicy? = nil, userKeys: Int? = nil, riskMetric: Int? = nil
    ) {
        self.environment = environment
        self.appVersion = appVersion
        self.launchCategory = launchCategory
        self.keyPolicy = keyPolicy
        self.userKeys = userKeys
        self.riskMetric = riskMetric
    }
}
