import AssertGateCore
import AssertGateTestSupport
import Foundation
import Logging
import Testing

extension Integration {
    /// risk.md §4: one budget of `attest` challenges for every gateway on a Redis.
    @Suite(.serialized) struct RampUpTests {
        static let perSecond = 20.0
        static let burst = 10

        /// Two gateways (the harness's and a second one started from the same
        /// file, so on the same Redis) are driven as fast as curl goes for a
        /// bounded time; the challenges they issue together stay within
        /// perSecond × window + burst, and each of them issues some.
        @Test func twoGatewaysShareOneBudget() async throws {
            let h = try await EnforcementHarness.start(.init(
                challengeRate: "{perSecond: 100000, burst: 100000}",
                rampUp: "{perSecond: \(Self.perSecond), burst: \(Self.burst)}"))
            var logger = Logger(label: "assertgate.e2e.second")
            logger.logLevel = .critical
            let second = try await GatewayServer.start(configPath: h.configPath, workers: 1, logger: logger)
            do {
                try await run(h, second)
            } catch {
                await second.shutdown(drain: .seconds(1))
                try await h.stop()
                throw error
            }
            await second.shutdown(drain: .seconds(1))
            try await h.stop()
        }

        private func run(_ h: EnforcementHarness, _ second: GatewayServer) async throws {
            let secondBase = "http://127.0.0.1:\(second.ports[0])"
            let secondAdmin = "http://127.0.0.1:\(second.adminPort)"
            let ready = Date().addingTimeInterval(10)
            while try await h.send("GET", "/readyz", http1: true, base: secondAdmin).status != 200 {
                guard Date() < ready else { throw HarnessError("the second gateway was not ready within 10 s") }
                try await Task.sleep(for: .milliseconds(20))
            }
            let device = try h.newDevice()
            let bodyFile = h.directory + "/attest-challenge.json"
            try #"{"keyId":"\#(device.keyIdBase64)","purpose":"attest"}"#.write(
                toFile: bodyFile, atomically: true, encoding: .utf8)

            let start = Date()
            let window: TimeInterval = 3
            async let first = Self.drive(h.base, body: bodyFile, until: start.addingTimeInterval(window))
            async let other = Self.drive(secondBase, body: bodyFile, until: start.addingTimeInterval(window))
            let (a, b) = try await (first, other)
            let elapsed = Date().timeIntervalSince(start)

            let issued = a.issued + b.issued
            let budget = Self.perSecond * elapsed + Double(Self.burst)
            #expect(Double(issued) <= budget, "issued \(issued) in \(elapsed) s, budget \(budget)")
            // Refill happened (more than the burst) and the limit was hit.
            #expect(issued > Self.burst, "issued \(issued) in \(elapsed) s")
            #expect(a.issued > 0 && b.issued > 0, "per gateway: \(a.issued), \(b.issued)")
            #expect(a.limited + b.limited > 0)
            #expect(a.other + b.other == 0, "answers other than 200 and 429: \(a.other + b.other)")

            // Past the budget: 429 rate-limited with a whole-seconds Retry-After.
            var refused: EnforcementHarness.Response?
            for _ in 0..<20 where refused == nil {
                let r = try await h.send(
                    "POST", EnforcementHarness.prefix + "/challenge", body: #"{"keyId":"\#(device.keyIdBase64)","purpose":"attest"}"#,
                    base: secondBase)
                if r.status == 429 { refused = r }
            }
            let r = try #require(refused)
            #expect(r.reason == "rate-limited")
            #expect(r.headers["retry-after"] == "1")
            // Challenges of purpose assert are not counted.
            let assert = try await h.send(
                "POST", EnforcementHarness.prefix + "/challenge", body: #"{"keyId":"\#(device.keyIdBase64)","purpose":"assert"}"#)
            #expect(assert.status == 200)

            // The first gateway counted exactly what its client saw.
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            #expect(metrics.contains(#"assertgate_attest_challenges_total{result="issued"} \#(a.issued)\#n"#))
            #expect(metrics.contains(#"assertgate_attest_challenges_total{result="ramp-limited"} \#(a.limited)\#n"#))
        }

        struct Tally {
            var issued = 0
            var limited = 0
            var other = 0
        }

        /// POSTs the challenge body to `base` in batches of 50 on one kept-alive
        /// connection (one curl each) until `deadline`; counts the statuses.
        static func drive(_ base: String, body: String, until deadline: Date) async throws -> Tally {
            var tally = Tally()
            let url = base + EnforcementHarness.prefix + "/challenge"
            var args = [
                "-sS", "--http1.1", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", "@" + body,
                "-w", "%{http_code}\n",
            ]
            for _ in 0..<50 { args += ["-o", "/dev/null", url] }
            while Date() < deadline {
                let r = try await Run.tool("curl", args, timeout: 30)
                guard r.status == 0 else { throw HarnessError("curl failed (\(r.status)): \(r.stderr)") }
                for code in r.stdout.split(separator: "\n") {
                    switch code {
                    case "200": tally.issued += 1
                    case "429": tally.limited += 1
                    default: tally.other += 1
                    }
                }
            }
            return tally
        }
    }
}
