/// check-config's listing of the rules each route applies to each app's keys
/// (risk.md §2), and the warnings about rules that can never act.
public enum RulesSummary {
    /// One line per enforce/monitor route and app.
    public static func lines(_ config: GatewayConfig) -> [String] {
        var out = ["rules (effective per route and app; a route's value replaces the app's per key and block):"]
        for (i, route) in config.routes.enumerated() where route.mode != .passthrough {
            for app in config.apps {
                let rules = RulesConfig.effective(app: app.rules, route: route.rules)
                let always = "environments \(list(app.environments.sorted().map(\.rawValue))) (always)"
                var line = "  [\(i)] \(app.appId): require " + ([always] + describe(rules.require)).joined(separator: ", ")
                let flags = describe(rules.flag)
                if !flags.isEmpty { line += "; flag " + flags.joined(separator: ", ") }
                out.append(line)
            }
        }
        return out
    }

    static func describe(_ set: RuleSet) -> [String] {
        var parts: [String] = []
        if let v = set.environments { parts.append("environments \(list(v.sorted().map(\.rawValue)))") }
        if let v = set.launchCategories { parts.append("launchCategories \(v.description)") }
        if let v = set.minAppVersion { parts.append("minAppVersion \(v.text)") }
        if let v = set.keyPolicy { parts.append("keyPolicy \(v.rawValue)") }
        if let v = set.maxUserKeys { parts.append("maxUserKeys \(v)") }
        if let v = set.maxRiskMetric { parts.append("maxRiskMetric \(v)") }
        if let v = set.deviceBits { parts.append("deviceBits \(v.description)") }
        return parts
    }

    private static func list(_ items: [String]) -> String { "[" + items.joined(separator: ", ") + "]" }

    /// Rules that can never act: `maxRiskMetric` without `fraudMetric` (no
    /// key ever gets a metric) and an app's rules when every route is
    /// passthrough. (`deviceBits` without `deviceCheck: query` is an error.)
    public static func warnings(_ config: GatewayConfig) -> [String] {
        var out: [String] = []
        let checked = config.routes.contains { $0.mode != .passthrough }
        for (i, app) in config.apps.enumerated() {
            let path = "apps[\(i)].rules"
            if !app.rules.isEmpty, !checked {
                out.append("\(path) never act: no route is enforce or monitor")
            }
            for (block, set) in [("require", app.rules.require), ("flag", app.rules.flag)]
            where set.maxRiskMetric != nil && config.fraudMetric == nil {
                out.append("\(path).\(block).maxRiskMetric has no effect without fraudMetric: keys get a risk metric only from refreshed receipts")
            }
        }
        for (i, route) in config.routes.enumerated() where route.mode == .passthrough {
            // `rules` is refused on a passthrough route; the old key is accepted for
            // compatibility, so say that it does nothing there.
            if route.rules.require.maxRiskMetric != nil {
                out.append("routes[\(i)].maxRiskMetric never acts: the route is passthrough (no assertion is checked)")
            }
        }
        for (i, route) in config.routes.enumerated() where route.mode != .passthrough {
            if config.fraudMetric == nil {
                // The old route key is the same rule, and either may be the one in the file.
                if route.rules.require.maxRiskMetric != nil {
                    out.append(
                        "routes[\(i)].rules.require.maxRiskMetric (or its old spelling routes[\(i)].maxRiskMetric) has no effect without fraudMetric: "
                            + "keys get a risk metric only from refreshed receipts")
                }
                if route.rules.flag.maxRiskMetric != nil {
                    out.append("routes[\(i)].rules.flag.maxRiskMetric has no effect without fraudMetric: keys get a risk metric only from refreshed receipts")
                }
            }
        }
        return out
    }
}
