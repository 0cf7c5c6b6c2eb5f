import AssertGateTestSupport
import Foundation
import Testing

extension Integration {
    /// deploy/prometheus/assertgate-alerts.yml in a real Prometheus (Debian's
    /// package) scraping a live gateway on loopback: Redis goes away, asserted
    /// requests fail, and AssertGateRedisUnreachable fires, seen through
    /// Prometheus' HTTP API. The rules' `for:` durations are set to 0s in the
    /// copy Prometheus loads, so the test does not wait minutes; the
    /// expressions are the shipped ones.
    @Suite(.serialized) struct PrometheusAlertTests {
        static let binary = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }

        @Test func redisUnreachableFiresInARealPrometheus() async throws {
            guard let binary = Self.binary else {
                Issue.record("prometheus is not installed (Debian: apt-get install prometheus)")
                return
            }
            let h = try await EnforcementHarness.start()
            var root = URL(fileURLWithPath: #filePath)
            for _ in 0..<4 { root.deleteLastPathComponent() }
            let shipped = try String(
                contentsOf: root.appendingPathComponent("deploy/prometheus/assertgate-alerts.yml"), encoding: .utf8)
            let rules = shipped.replacingOccurrences(of: #"for: \d+m"#, with: "for: 0s", options: .regularExpression)
            #expect(rules != shipped)
            try rules.write(toFile: h.directory + "/alerts.yml", atomically: true, encoding: .utf8)
            try """
                global: {scrape_interval: 1s, evaluation_interval: 1s}
                rule_files: [\(h.directory)/alerts.yml]
                scrape_configs:
                  - job_name: assertgate
                    static_configs: [{targets: ["127.0.0.1:\(h.server.adminPort)"]}]
                """.write(toFile: h.directory + "/prometheus.yml", atomically: true, encoding: .utf8)

            // A free port, released just before Prometheus binds it.
            let port = try { try ReservedPort().port }()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = [
                "--config.file=\(h.directory)/prometheus.yml", "--storage.tsdb.path=\(h.directory)/tsdb",
                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
            ]
            let log = FileHandle(forWritingAtPath: "/dev/null")
            process.standardOutput = log
            process.standardError = log
            try process.run()
            defer {
                process.terminate()
                process.waitUntilExit()
            }
            let api = "http://127.0.0.1:\(port)"

            func poll(_ what: String, seconds: Double, _ body: () async throws -> Bool) async throws {
                let deadline = Date().addingTimeInterval(seconds)
                while try await !body() {
                    guard Date() < deadline else { throw HarnessError("\(what) within \(seconds) s") }
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
            func query(_ promql: String) async throws -> [[String: Any]] {
                let encoded = promql.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                let r = try await h.send("GET", "/api/v1/query?query=\(encoded)", http1: true, base: api)
                return ((r.json["data"] as? [String: Any])?["result"] as? [[String: Any]]) ?? []
            }

            try await poll("Prometheus ready", seconds: 30) {
                (try? await h.send("GET", "/-/ready", http1: true, base: api))?.status == 200
            }
            // It has scraped the gateway (and its rules load: the recording rule exists).
            try await poll("a scrape of the gateway", seconds: 30) {
                try await !query("assertgate_store_errors_total").isEmpty
            }
            let groups = try await h.send("GET", "/api/v1/rules", http1: true, base: api)
            #expect(groups.body.contains("AssertGateRedisUnreachable"))
            #expect(groups.body.contains("AssertGateMissingAssertionsRising"))

            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            h.redis.stop()
            var counter: UInt32 = 0
            try await poll("AssertGateRedisUnreachable firing", seconds: 60) {
                counter += 1
                let r = try await h.send(
                    "GET", "/enforce/x",
                    headers: h.assertionHeaders(device, method: "GET", path: "/enforce/x", counter: counter))
                #expect(r.status == 503)
                let alerts = try await h.send("GET", "/api/v1/alerts", http1: true, base: api)
                let list = ((alerts.json["data"] as? [String: Any])?["alerts"] as? [[String: Any]]) ?? []
                return list.contains {
                    ($0["labels"] as? [String: Any])?["alertname"] as? String == "AssertGateRedisUnreachable"
                        && $0["state"] as? String == "firing"
                }
            }
            try await h.stop()
        }
    }
}
