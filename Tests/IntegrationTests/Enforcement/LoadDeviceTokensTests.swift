import AppleMock
import AssertGateTestSupport
import Foundation
import Testing

/// `assertgate-device load --device-tokens` (BENCHMARKS.md §8) against the
/// whole gateway and the Apple mock: every request spends a token of its own,
/// so none is refused as reused, and the mock's device names follow the slots.
extension Integration {
    @Suite(.serialized) struct LoadDeviceTokensTests {
        @Test func loadSendsAFreshMockDeviceTokenOnEveryRequest() async throws {
            guard let tool = BuiltProduct.path("assertgate-device") else {
                Issue.record("assertgate-device is not built next to the tests")
                return
            }
            var options = EnforcementHarness.Options()
            options.deviceCheck = true
            let h = try await EnforcementHarness.start(options)
            let apple = try #require(h.apple)
            let common = ["load", "--gateway", h.base, "--passthrough", "--path", "/dc-device/load",
                          "--connections", "1", "--streams", "3", "--threads", "1", "--json"]

            // `fallback: device`: no assertion, the device token alone; 30 requests, 30 tokens.
            let run = try await Run.tool(tool, common + ["--device-tokens", "--requests", "30"])
            #expect(run.status == 0, "\(run.stderr)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout)")
            #expect(report["successes"] as? Int == 30)
            #expect((report["failures"] as? [String: Int])?.isEmpty == true)
            let validates = apple.requests.filter { $0.endpoint == .validate }
            #expect(validates.count == 30)
            #expect(Set(validates.compactMap(\.device)) == ["load-0-0", "load-0-1", "load-0-2"])

            // Without the option nothing is sent: the route answers missing-assertion.
            let none = try await Run.tool(tool, common + ["--requests", "3"])
            #expect(none.status != 0)
            #expect(none.stdout.contains("missing-assertion"), "\(none.stdout)")

            // Tokens made with another secret: the mock refuses them, the gateway says so.
            let forged = try await Run.tool(
                tool, common + ["--device-tokens", "--device-secret", "not-the-mock's", "--requests", "3"])
            #expect(forged.status != 0)
            #expect(forged.stdout.contains("invalid-device-token"), "\(forged.stdout)")

            // The token options alone are a usage error.
            let usage = try await Run.tool(tool, common + ["--device-prefix", "x", "--requests", "1"])
            #expect(usage.status != 0)
            #expect(usage.stderr.contains("need --device-tokens"), "\(usage.stderr)")
            try await h.stop()
        }
    }
}
