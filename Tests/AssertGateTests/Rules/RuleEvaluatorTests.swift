import Testing
import Verifier

@testable import AssertGateCore

/// risk.md §2 and §6.2: each rule, its missing-signal column, the order and the merge.
@Suite struct RuleEvaluatorTests {
    static let full = RuleSignals(
        environment: .production, appVersion: "2.10", launchCategory: 4, keyPolicy: .other, userKeys: 2,
        riskMetric: 3)

    static func require(_ edit: (inout RuleSet) -> Void) -> RulesConfig {
        var set = RuleSet()
        edit(&set)
        return RulesConfig(require: set)
    }

    @Test func versionOrder() {
        let ordered = ["1", "2", "2.0.1", "2.9", "2.10", "2.10.0.1", "2.beta", "3"]
        for (i, a) in ordered.enumerated() {
            for b in ordered[(i + 1)...] { #expect(AppVersion(a) < AppVersion(b), "\(a) < \(b)") }
        }
        #expect(AppVersion("2") == AppVersion("2.0"))
        #expect(AppVersion("03") == AppVersion("3"))
        #expect(AppVersion("2.alpha") < AppVersion("2.beta"))
        #expect(!(AppVersion("2.0") < AppVersion("2")))
        #expect(AppVersion("99999999999999999999999") > AppVersion("9999999999999999999999"))
    }

    @Test func eachRulePassesAndFailsWithItsReason() {
        let s = Self.full
        let cases: [(RulesConfig, RulesConfig, ReasonToken)] = [
            (Self.require { $0.environments = [.production] }, Self.require { $0.environments = [.development] },
             .environmentNotAllowed),
            (Self.require { $0.launchCategories = .init(allowed: [4], allowsMissing: false) },
             Self.require { $0.launchCategories = .init(allowed: [2], allowsMissing: true) }, .launchCategoryNotAllowed),
            (Self.require { $0.minAppVersion = AppVersion("2.9") }, Self.require { $0.minAppVersion = AppVersion("2.11") },
             .appVersionTooOld),
            (Self.require { $0.maxUserKeys = 2 }, Self.require { $0.maxUserKeys = 1 }, .tooManyKeys),
            (Self.require { $0.maxRiskMetric = 3 }, Self.require { $0.maxRiskMetric = 2 }, .riskTooHigh),
        ]
        for (passing, failing, reason) in cases {
            #expect(RuleEvaluator.evaluate(passing, s) == .pass)
            #expect(RuleEvaluator.evaluate(failing, s) == RuleVerdict(rejection: reason, flags: []))
            let flagged = RulesConfig(flag: failing.require)
            #expect(RuleEvaluator.evaluate(flagged, s) == RuleVerdict(rejection: nil, flags: [reason]))
        }
        let mac = Self.require { $0.keyPolicy = .macosFullSecurity }
        #expect(RuleEvaluator.evaluate(mac, s).rejection == .keyPolicyNotAllowed)
        var macSignals = s
        macSignals.keyPolicy = .macosFullSecurity
        #expect(RuleEvaluator.evaluate(mac, macSignals) == .pass)
    }

    @Test func missingSignals() {
        let none = RuleSignals(environment: .production)
        #expect(RuleEvaluator.evaluate(Self.require { $0.launchCategories = .init(allowed: [4], allowsMissing: false) }, none)
            .rejection == .launchCategoryNotAllowed)
        #expect(RuleEvaluator.evaluate(Self.require { $0.launchCategories = .init(allowed: [4], allowsMissing: true) }, none) == .pass)
        #expect(RuleEvaluator.evaluate(Self.require { $0.minAppVersion = AppVersion("9") }, none) == .pass)
        #expect(RuleEvaluator.evaluate(Self.require { $0.keyPolicy = .macosFullSecurity }, none).rejection == .keyPolicyNotAllowed)
        #expect(RuleEvaluator.evaluate(Self.require { $0.maxUserKeys = 1 }, none) == .pass)
        #expect(RuleEvaluator.evaluate(Self.require { $0.maxRiskMetric = 0 }, none) == .pass)
        // deviceBits cannot act yet: never a failure.
        #expect(RuleEvaluator.evaluate(Self.require { $0.deviceBits = DeviceBitsRule(bit0: true) }, none) == .pass)
    }

    @Test func firstFailingRequireInTableOrderAndEveryFlagInOrder() {
        var require = RuleSet()
        require.maxRiskMetric = 0
        require.minAppVersion = AppVersion("9")
        var flag = RuleSet()
        flag.maxUserKeys = 1
        flag.launchCategories = .init(allowed: [1], allowsMissing: false)
        flag.maxRiskMetric = 0
        var seen: [String] = []
        let rejected = RuleEvaluator.evaluate(RulesConfig(require: require, flag: flag), Self.full) {
            seen.append("\($0.name)=\($1.name)")
        }
        // The first failing require rule decides; nothing after it is evaluated.
        #expect(rejected == RuleVerdict(rejection: .appVersionTooOld, flags: []))
        #expect(seen == ["minAppVersion=reject"])
        seen = []
        _ = RuleEvaluator.evaluate(RulesConfig(flag: flag), Self.full) { seen.append("\($0.name)=\($1.name)") }
        #expect(seen == ["launchCategories=flag", "maxUserKeys=flag", "maxRiskMetric=flag"])
        #expect(RuleEvaluator.evaluate(RulesConfig(flag: flag), Self.full).flags
            == [.launchCategoryNotAllowed, .tooManyKeys, .riskTooHigh])
    }

    @Test func routeValuesReplaceAppValuesPerKeyAndBlock() {
        var appRequire = RuleSet()
        appRequire.minAppVersion = AppVersion("2")
        appRequire.maxUserKeys = 5
        var routeRequire = RuleSet()
        routeRequire.minAppVersion = AppVersion("3")
        var routeFlag = RuleSet()
        routeFlag.maxUserKeys = 1
        let merged = RulesConfig.effective(
            app: RulesConfig(require: appRequire), route: RulesConfig(require: routeRequire, flag: routeFlag))
        #expect(merged.require.minAppVersion == AppVersion("3"))
        #expect(merged.require.maxUserKeys == 5)
        // §6.20: the same key in the other block applies as well.
        #expect(merged.flag.maxUserKeys == 1)
    }
}
