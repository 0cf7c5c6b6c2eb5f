import NIOCore
import Verifier

/// Everything enforcement needs from one configuration, built once per
/// load/reload (trust anchors are read from disk here, never per request) and
/// shared read-only by every worker.
public final class EnforcementContext: Sendable {
    public let verifier: AttestationVerifier
    public let allowedApps: [String: Set<AppAttestEnvironment>]
    /// What every asserted request is judged by, per App ID: the allowed
    /// environments (the always-on rule) and the app's rules (risk.md §2).
    /// Rebuilt on reload, so the configuration is the source of truth for
    /// keys already stored.
    public let apps: [String: AppPolicy]
    public let headerNames: AssertionHeaderNames
    public let prefix: String
    public let challengeTTL: TimeAmount
    public let challengeRate: RateConfig
    /// The shared budget of `attest` challenges (risk.md §4); nil = none.
    public let rampUp: RateConfig?
    /// `fraudMetric` is configured: new keys go on the receipt-refresh schedule.
    public let refreshesReceipts: Bool

    public enum BuildError: Error, CustomStringConvertible {
        case trustAnchors(String)
        public var description: String {
            switch self {
            case .trustAnchors(let d): return d
            }
        }
    }

    /// `refreshesReceipts`: whether a receipt refresher runs (a reload cannot
    /// start or stop one); nil = whether `config` has `fraudMetric`.
    public init(config: GatewayConfig, refreshesReceipts: Bool? = nil) throws(BuildError) {
        let a = config.attestation
        let anchors: TrustAnchors
        let receiptAnchors: TrustAnchors
        do {
            anchors = a.trustAnchors.isEmpty ? .appleAppAttestation : try TrustAnchors(pemFiles: a.trustAnchors)
            receiptAnchors =
                a.receiptTrustAnchors.isEmpty ? .appleRootG3 : try TrustAnchors(pemFiles: a.receiptTrustAnchors)
        } catch {
            throw .trustAnchors("attestation.trustAnchors: \(error)")
        }
        self.verifier = AttestationVerifier(
            anchors: anchors, receiptAnchors: receiptAnchors,
            clockSkewSeconds: a.clockSkew.nanoseconds / 1_000_000_000)
        var apps: [String: Set<AppAttestEnvironment>] = [:]
        for app in config.apps {
            apps[app.appId, default: []].formUnion(
                app.environments.map { $0 == .production ? AppAttestEnvironment.production : .development })
        }
        self.allowedApps = apps
        var policies: [String: AppPolicy] = [:]
        for app in config.apps {
            policies[app.appId] = AppPolicy(environments: app.environments, rules: app.rules)
        }
        self.apps = policies
        self.headerNames = a.headers
        self.prefix = a.prefix
        self.challengeTTL = a.challengeTTL
        self.challengeRate = a.challengeRate
        self.rampUp = a.rampUp
        self.refreshesReceipts = refreshesReceipts ?? (config.fraudMetric != nil)
    }
}

/// One configured app as the assertion path sees it.
public struct AppPolicy: Sendable {
    public let environments: Set<AppEnvironment>
    public let rules: RulesConfig

    public init(environments: Set<AppEnvironment>, rules: RulesConfig) {
        self.environments = environments
        self.rules = rules
    }
}
