import AssertGateTestSupport
import AssertGateCore
import Foundation
import Testing

extension Integration {
    /// Opt-in throughput smoke test (like the bench: h2load -c 32 -m 32 GET /hello).
    /// Set ASSERTGATE_PERF_UPSTREAM=host:port of an upstream serving /hello (e.g. the
    /// bench's nginx on 127.0.0.1:9001); run with `swift test -c release`.
    @Suite struct PerfSmokeTests {
        static let upstream = ProcessInfo.processInfo.environment["ASSERTGATE_PERF_UPSTREAM"]

        @Test(.enabled(if: upstream != nil, "set ASSERTGATE_PERF_UPSTREAM to run"))
        func h2loadAgainstRealUpstream() async throws {
            let parts = (Self.upstream ?? "").split(separator: ":")
            let endpoint = UpstreamEndpoint(host: String(parts.first ?? "127.0.0.1"), port: Int(parts.last ?? "9001") ?? 9001)
            let workers = Int(ProcessInfo.processInfo.environment["ASSERTGATE_PERF_WORKERS"] ?? "1") ?? 1
            let h = try await Harness.start(upstreamEndpoints: [endpoint], threads: workers) {
                $0.upstreams["legacy"]?.maxConnectionsPerEndpoint = 2048
                $0.limits.maxConcurrentStreams = 128
            }
            let seconds = ProcessInfo.processInfo.environment["ASSERTGATE_PERF_SECONDS"] ?? "5"
            let r = try await Run.tool(
                "h2load", ["-t", "1", "-c", "32", "-m", "32", "-D", seconds, "--warm-up-time", "1", "\(h.base)/hello"],
                timeout: 120)
            print(r.stdout)
            #expect(r.status == 0)
            #expect(r.stdout.contains(" 0 failed, 0 errored"))
            try await h.stop()
        }
    }
}
