import Verifier

/// The keys of risk.md §2 that act, in evaluation (table) order.
/// `deviceBits` is last: it needs DeviceCheck's answer, which comes after the
/// gate, so `DevicePolicy` applies and counts it; `RuleEvaluator` skips it.
public enum RuleKey: Int, Sendable, CaseIterable {
    case environments, launchCategories, minAppVersion, keyPolicy, maxUserKeys, maxRiskMetric, deviceBits

    /// The config key and metric label.
    public var name: String {
        switch self {
        case .environments: return "environments"
        case .launchCategories: return "launchCategories"
        case .minAppVersion: return "minAppVersion"
        case .keyPolicy: return "keyPolicy"
        case .maxUserKeys: return "maxUserKeys"
        case .maxRiskMetric: return "maxRiskMetric"
        case .deviceBits: return "deviceBits"
        }
    }

    /// The reason a failure of this rule gives.
    public var reason: ReasonToken {
        switch self {
        case .environments: return .environmentNotAllowed
        case .launchCategories: return .launchCategoryNotAllowed
        case .minAppVersion: return .appVersionTooOld
        case .keyPolicy: return .keyPolicyNotAllowed
        case .maxUserKeys: return .tooManyKeys
        case .maxRiskMetric: return .riskTooHigh
        case .deviceBits: return .deviceBitsNotAllowed
        }
    }
}

/// One rule's outcome on one request (`assertgate_rule_results_total`).
public enum RuleResult: Int, Sendable, CaseIterable {
    case pass, reject, flag

    public var name: String {
        switch self {
        case .pass: return "pass"
        case .reject: return "reject"
        case .flag: return "flag"
        }
    }
}

/// What the rules concluded: the first failing `require` rule, and every
/// failing `flag` rule in table order.
public struct RuleVerdict: Sendable, Equatable {
    public var rejection: ReasonToken?
    public var flags: [ReasonToken]

    public static let pass = RuleVerdict(rejection: nil, flags: [])

    public init(rejection: ReasonToken?, flags: [ReasonToken]) {
        self.rejection = rejection
        self.flags = flags
    }
}

/// Evaluates rules on values already in hand (no store work): a few
/// comparisons per request.
public enum RuleEvaluator {
    /// The result of one rule: nil when the block has no such rule.
    public static func check(_ key: RuleKey, _ rules: RuleSet, _ s: RuleSignals) -> Bool? {
        switch key {
        case .environments:
            return rules.environments.map { $0.contains(s.environment) }
        case .launchCategories:
            guard let rule = rules.launchCategories else { return nil }
            guard let category = s.launchCategory else { return rule.allowsMissing }
            return rule.allowed.contains(category)
        case .minAppVersion:
            guard let min = rules.minAppVersion else { return nil }
            // Missing passes: require a category to require iOS 27.
            guard let version = s.appVersion else { return true }
            return !(AppVersion(version) < min)
        case .keyPolicy:
            guard let policy = rules.keyPolicy else { return nil }
            return s.keyPolicy == policy
        case .maxUserKeys:
            guard let max = rules.maxUserKeys else { return nil }
            guard let n = s.userKeys else { return true }
            return n <= max
        case .maxRiskMetric:
            guard let max = rules.maxRiskMetric else { return nil }
            guard let metric = s.riskMetric else { return true }
            return metric <= max
        case .deviceBits:
            return nil  // `DevicePolicy`, once DeviceCheck has answered
        }
    }

    /// `require` rules in table order up to the first failure (which decides:
    /// no flags then), else every `flag` rule. `observe` sees each rule evaluated.
    public static func evaluate(
        _ rules: RulesConfig, _ s: RuleSignals, observe: (RuleKey, RuleResult) -> Void = { _, _ in }
    ) -> RuleVerdict {
        for key in RuleKey.allCases {
            guard let ok = check(key, rules.require, s) else { continue }
            observe(key, ok ? .pass : .reject)
            if !ok { return RuleVerdict(rejection: key.reason, flags: []) }
        }
        var flags: [ReasonToken] = []
        for key in RuleKey.allCases {
            guard let ok = check(key, rules.flag, s) else { continue }
            observe(key, ok ? .pass : .flag)
            if !ok { flags.append(key.reason) }
        }
        return RuleVerdict(rejection: nil, flags: flags)
    }
}
