import AssertGateCore
import Foundation
import Testing

/// deploy/prometheus: the alert rules pass `promtool check rules` and their
/// unit tests (`promtool test rules`), and every series they read is one the
/// gateway exports.
@Suite struct PrometheusRulesTests {
    static let directory = PackagePaths.root + "/deploy/prometheus"
    static let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    @Test func rulesPassPromtoolCheckAndTheirUnitTests() throws {
        guard let promtool = Self.promtool else {
            Issue.record("promtool is not installed (Debian: apt-get install prometheus)")
            return
        }
        let check = try Subprocess.run(promtool, ["check", "rules", Self.directory + "/assertgate-alerts.yml"])
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        #expect(check.stdout.contains("SUCCESS: 7 rules found"), "\(check.stdout)")
        let test = try Subprocess.run(promtool, ["test", "rules", Self.directory + "/assertgate-alerts.test.yml"])
        #expect(test.status == 0, "\(test.stdout)\(test.stderr)")
        #expect(test.stdout.contains("SUCCESS"), "\(test.stdout)")
    }

    @Test func everySeriesTheRulesReadIsExported() throws {
        let rules = try String(contentsOfFile: Self.directory + "/assertgate-alerts.yml", encoding: .utf8)
        let exported = Set(
            GatewayMetrics().registry.exposition().split(separator: "\n")
                .filter { $0.hasPrefix("# TYPE ") }
                .compactMap { $0.split(separator: " ").dropFirst(2).first.map(String.init) })
        #expect(exported.contains("assertgate_rule_results_total"))
        var read = Set<String>()
        var rest = Substring(rules)
        while let start = rest.range(of: "assertgate_") {
            let name = rest[start.lowerBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            read.insert(String(name))
            rest = rest[start.upperBound...]
        }
        #expect(read.count >= 5, "\(read)")
        #expect(read.isSubset(of: exported), "not exported: \(read.subtracting(exported).sorted())")
    }
}
