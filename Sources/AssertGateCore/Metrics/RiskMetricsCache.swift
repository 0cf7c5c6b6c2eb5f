import Verifier

/// Per-worker handles of the risk series (`assertgate_rule_results_total`,
/// `assertgate_verified_requests_total`), resolved once per label set so a
/// request costs one dictionary lookup per series family and relaxed atomic
/// adds. Deliberately not `Sendable`: keep one per event loop.
public final class RiskMetricsCache {
    /// Every rule × result counter of one route, indexed without hashing.
    public final class RouteRuleCounters {
        private let counters: [Counter]

        init(family: MetricFamilyOf<Counter>, route: String) {
            var counters: [Counter] = []
            for key in RuleKey.allCases {
                for result in RuleResult.allCases { counters.append(family.labels(route, key.name, result.name)) }
            }
            self.counters = counters
        }

        public func inc(_ key: RuleKey, _ result: RuleResult) {
            counters[key.rawValue * RuleResult.allCases.count + result.rawValue].inc()
        }
    }

    private struct VerifiedLabels: Hashable {
        var route: String
        var environment: AppEnvironment
        var category: UInt32?
    }

    private let metrics: GatewayMetrics
    private var rules: [String: RouteRuleCounters] = [:]
    private var verified: [VerifiedLabels: Counter] = [:]

    public init(metrics: GatewayMetrics) {
        self.metrics = metrics
    }

    /// The route's rule counters (all 21 series appear on first use, at 0).
    public func rules(route: String) -> RouteRuleCounters {
        if let counters = rules[route] { return counters }
        let counters = RouteRuleCounters(family: metrics.ruleResults, route: route)
        rules[route] = counters
        return counters
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
