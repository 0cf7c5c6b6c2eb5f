import AssertGateCore
import Foundation
import Verifier

// rules-bench [--iterations N]
//
// What the risk rules (risk.md §2) add to an asserted request, without the
// noise of a whole gateway: the work `AssertionGate.decide` does for rules —
// the app/route merge, five rules evaluated (require and flag) and their
// result counters — timed over N iterations on one core, next to the same
// loop with no rules. The asserted request itself costs ≈ 110–130 µs of
// gateway CPU (BENCHMARKS.md §3).

func parseIterations() -> Int {
    var iterations = 2_000_000
    var args = CommandLine.arguments.dropFirst()
    while let arg = args.popFirst() {
        if arg == "--iterations", let n = args.popFirst().flatMap(Int.init), n > 0 {
            iterations = n
        } else if arg == "--help" || arg == "-h" {
            print("usage: rules-bench [--iterations N]")
            exit(0)
        } else {
            FileHandle.standardError.write(Data("usage: rules-bench [--iterations N]\n".utf8))
            exit(2)
        }
    }
    return iterations
}
let iterations = parseIterations()

var appRequire = RuleSet()
appRequire.launchCategories = LaunchCategoryRule(allowed: [2, 4], allowsMissing: true)
appRequire.minAppVersion = AppVersion("1.0")
appRequire.maxUserKeys = 3
appRequire.maxRiskMetric = 50
var appFlag = RuleSet()
appFlag.environments = [.production]
let appRules = RulesConfig(require: appRequire, flag: appFlag)
var routeRequire = RuleSet()
routeRequire.minAppVersion = AppVersion("2.0")
let routeRules = RulesConfig(require: routeRequire)
let signals = RuleSignals(
    environment: .production, appVersion: "2.10.1", launchCategory: 4, keyPolicy: .other, userKeys: 2, riskMetric: 7)
let metrics = GatewayMetrics()
let cache = RiskMetricsCache(metrics: metrics)

@MainActor func time(_ label: String, _ body: () -> Int) {
    let start = DispatchTime.now().uptimeNanoseconds
    let checksum = body()
    let ns = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(iterations)
    print(String(format: "%@: %.1f ns per request (checksum %d)", label, ns, checksum))
}

time("no rules (the isEmpty checks)") {
    var n = 0
    for _ in 0..<iterations where !appRules.flag.isEmpty || !RulesConfig().isEmpty { n &+= 1 }
    return n
}
time("five app rules, one route rule, counters") {
    var n = 0
    for _ in 0..<iterations {
        let rules = RulesConfig.effective(app: appRules, route: routeRules)
        let counters = cache.rules(route: "api")
        let verdict = RuleEvaluator.evaluate(rules, signals) { counters.inc($0, $1) }
        n &+= verdict.flags.count + (verdict.rejection == nil ? 0 : 1)
    }
    return n
}
