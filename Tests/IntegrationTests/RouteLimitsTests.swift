import AssertGateCore
import AssertGateTestSupport
import Foundation
import Testing

/// `routes[].limits` through a real gateway, curl and the recording upstream:
/// one route waits longer and takes larger bodies than the global limits
/// allow, and every other route still has the global ones.
extension Integration {
    @Suite struct RouteLimitsTests {
        static func harness() async throws -> Harness {
            try await Harness.start(responseTimeout: .milliseconds(300), threads: 1) {
                $0.limits.maxRequestBodyBytes = 1 << 10
                var long = RouteConfig(match: RouteMatch(kind: .prefix("/long/")), upstream: "legacy", mode: .passthrough)
                long.limits.responseTimeout = .seconds(10)
                long.limits.maxRequestBodyBytes = 1 << 20
                $0.routes.insert(long, at: 0)
            }
        }

        @Test(arguments: ["--http2-prior-knowledge", "--http1.1"])
        func aRouteWaitsAndTakesWhatItsOwnLimitsAllow(_ proto: String) async throws {
            let h = try await Self.harness()
            let status = ["-w", "\n%{http_code}"]
            // An answer after 1 s: past the upstream's 300 ms, within the route's 10 s.
            let slow = try await Run.tool("curl", ["-sS", proto, "-m", "20", "\(h.base)/long/slow?ms=1000"] + status)
            #expect(slow.stdout == "slow\n\n200", "\(slow.stdout) \(slow.stderr)")
            let cut = try await Run.tool("curl", ["-sS", proto, "-m", "20", "\(h.base)/slow?ms=1000"] + status)
            #expect(cut.stdout.hasSuffix("\n504"), "\(cut.stdout) \(cut.stderr)")
            #expect(cut.stdout.contains("\"reason\":\"upstream-timeout\""))

            // 64 KiB: over the global 1 KiB, within the route's 1 MiB.
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("route-limits-\(UUID().uuidString)")
            try Data(repeating: 0x61, count: 64 << 10).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let big = try await Run.tool("curl", ["-sS", proto, "-X", "POST", "-T", file.path, "\(h.base)/long/upload"] + status)
            #expect(big.stdout == "ok\n\n200", "\(big.stdout) \(big.stderr)")
            #expect(h.upstream.requests.contains { $0.uri == "/long/upload" })
            let refused = try await Run.tool("curl", ["-sS", proto, "-X", "POST", "-T", file.path, "\(h.base)/upload"] + status)
            #expect(refused.stdout.hasSuffix("\n413"), "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stdout.contains("\"reason\":\"body-too-large\""))
            #expect(!h.upstream.requests.contains { $0.uri == "/upload" })
            try await h.stop()
        }

        /// A route's long wait is for its answer, not for a connection: with
        /// the only upstream connection held for 3 s, the next request on the
        /// route is answered after the upstream's own 300 ms in the queue.
        @Test func aRoutesLongWaitDoesNotLengthenTheQueueForAConnection() async throws {
            let h = try await Harness.start(responseTimeout: .milliseconds(300), threads: 1) {
                $0.upstreams["legacy"]?.maxConnectionsPerEndpoint = 1
                $0.upstreams["legacy"]?.maxConnectionsPerClient = 1
                var long = RouteConfig(match: RouteMatch(kind: .prefix("/long/")), upstream: "legacy", mode: .passthrough)
                long.limits.responseTimeout = .seconds(10)
                $0.routes.insert(long, at: 0)
            }
            let holder = Task { try await Run.tool("curl", ["-sS", "--http1.1", "-m", "20", "\(h.base)/long/slow?ms=3000"]) }
            try await h.upstream.waitForRequests(1)
            let started = Date()
            let queued = try await Run.tool(
                "curl", ["-sS", "--http1.1", "-m", "20", "-w", "\n%{http_code}", "\(h.base)/long/slow?ms=10"])
            let waited = Date().timeIntervalSince(started)
            #expect(queued.stdout.hasSuffix("\n504"), "\(queued.stdout) \(queued.stderr)")
            #expect(queued.stdout.contains("\"reason\":\"upstream-timeout\""))
            #expect(waited < 2.5, "queued \(waited) s: as long as the route's wait, not the upstream's")
            // The held request itself had its route's 10 s and got its answer.
            #expect(try await holder.value.stdout == "slow\n")
            try await h.stop()
        }
    }
}
