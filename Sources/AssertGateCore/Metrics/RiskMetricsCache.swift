import Verifier

/// Per-worker handles of the risk series (`assertgate_rule_results_total`,
/// `assertgate_verified_requests_total`), resolved once per label set so a
/// request costs a dictionary lookup and a relaxed atomic add per series.
/// Deliberately not `Sendable`: keep one per event loop.
public final class RiskMetricsCache {
    private struct RuleKeyLabels: Hashable {
        var route: String
        var rule: RuleKey
        var result: RuleResult
    }

    private struct VerifiedLabels: Hashable {
        var route: String
        var environment: AppEnvironment
        var category: UInt32?
    }

    private let metrics: GatewayMetrics
    private var rules: [RuleKeyLabels: Counter] = [:]
    private var verified: [VerifiedLabels: Counter] = [:]

    public init(metrics: GatewayMetrics) {
        self.metrics = metrics
    }

    public func rule(route: String, _ rule: RuleKey, _ result: RuleResult) -> Counter {
        let key = RuleKeyLabels(route: route, rule: rule, result: result)
        if let counter = rules[key] { return counter }
        let counter = metrics.ruleResults.labels(route, rule.rawValue, result.rawValue)
        rules[key] = counter
        return counter
    }

    public func verified(route: String, environment: AppEnvironment, launchCategory: UInt32?) -> Counter {
        // Unnamed numbers share one label: an attacker-chosen category cannot grow the series.
        let category = launchCategory.flatMap { LaunchCategory.names[$0] == nil ? UInt32.max : $0 }
        let key = VerifiedLabels(route: route, environment: environment, category: category)
        if let counter = verified[key] { return counter }
        let label = category.map { $0 == UInt32.max ? "other" : LaunchCategory.name($0) } ?? "missing"
        let counter = metrics.verifiedRequests.labels(route, environment.rawValue, label)
        verified[key] = counter
        return counter
    }
}
