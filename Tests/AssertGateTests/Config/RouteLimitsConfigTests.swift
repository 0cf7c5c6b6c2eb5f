import Foundation
import NIOCore
import Testing

@testable import AssertGateCore

/// `routes[].limits`: a route's own body limits and response wait, for
/// long-lived streams, without loosening the global limits for every route.
@Suite struct RouteLimitsConfigTests {
    private static func yaml(route: String, limits: String = "", listener: String = "") -> String {
        """
        listeners: [{address: 127.0.0.1:8080\(listener)}]
        apps: [{appId: ABCDE12345.com.example.app}]
        store: {memory: {}}
        upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
        routes:
          - {match: {prefix: /chat.Chat/}, upstream: api, mode: passthrough\(route)}
          - {match: {prefix: /}, upstream: api, mode: passthrough}
        \(limits.isEmpty ? "" : "limits: {\(limits)}")

        """
    }



    @Test func aRouteSetsItsOwnLimitsAndTheRestKeepTheGlobalOnes() throws {
        let c = try ConfigText.load(
            Self.yaml(
                route: ", limits: {maxRequestBodyBytes: 2GiB, requestBodyTimeout: 10m, minRequestBodyRate: 0, responseTimeout: 5m}",
                limits: "requestBodyTimeout: 3s"))
        let chat = c.routes[0].limits
        #expect(chat.maxRequestBodyBytes == 2 << 30)
        #expect(chat.requestBodyTimeout == .minutes(10))
        #expect(chat.minRequestBodyRate == 0)
        #expect(chat.responseTimeout == .minutes(5))
        #expect(chat.body(c.limits) == BodyLimits(maxBytes: 2 << 30, timeout: .minutes(10), minRate: 0))
        // The other route has none of its own.
        #expect(c.routes[1].limits.isEmpty)
        #expect(c.routes[1].limits.body(c.limits) == BodyLimits(maxBytes: 16 << 20, timeout: .seconds(3), minRate: 1024))
        let summary = ConfigSummary.render(c)
        #expect(
            summary.contains(
                "its own limits: maxRequestBodyBytes 2GiB, requestBodyTimeout 10m, minRequestBodyRate off, responseTimeout 5m"),
            "\(summary)")
        #expect(summary.components(separatedBy: "its own limits").count == 2, "only the route that sets some shows them")
    }

    @Test func aPartialBlockKeepsTheGlobalValueOfEachKeyItOmits() throws {
        let c = try ConfigText.load(Self.yaml(route: ", limits: {requestBodyTimeout: 1m}", limits: "minRequestBodyRate: 2KiB"))
        #expect(c.routes[0].limits.body(c.limits) == BodyLimits(maxBytes: 16 << 20, timeout: .minutes(1), minRate: 2048))
        #expect(c.routes[0].limits.responseTimeout == nil)
    }

    @Test func theListenersIdleTimeoutOutlastsTheLongestWaitARouteAllows() throws {
        // Unset: the longest wait + 30 s (a stream quiet for 10 minutes is not cut as idle after 2).
        let c = try ConfigText.load(Self.yaml(route: ", limits: {requestBodyTimeout: 10m}"))
        #expect(c.listeners[0].idleTimeout == .seconds(630))
        let r = try ConfigText.load(Self.yaml(route: ", limits: {responseTimeout: 5m}"))
        #expect(r.listeners[0].idleTimeout == .seconds(330))
        // Set: it must be longer, and the error names the key that needs it.
        let e = ConfigText.errors(Self.yaml(route: ", limits: {requestBodyTimeout: 10m}", listener: ", idleTimeout: 5m"))
        #expect(
            e.contains { $0.contains("listeners[0].idleTimeout: 5m must be longer than routes[0].limits.requestBodyTimeout (10m)") },
            "\(e)")
        let global = ConfigText.errors(Self.yaml(route: "", limits: "requestBodyTimeout: 3m", listener: ", idleTimeout: 2m"))
        #expect(
            global.contains { $0.contains("listeners[0].idleTimeout: 2m must be longer than limits.requestBodyTimeout (3m)") },
            "\(global)")
    }

    @Test func wrongValuesSayWhatIsWrong() {
        let unknown = ConfigText.errors(Self.yaml(route: ", limits: {maxBodyBytes: 1MiB}"))
        #expect(unknown.contains { $0.contains("routes[0].limits") && $0.contains("maxBodyBytes") }, "\(unknown)")
        let zero = ConfigText.errors(Self.yaml(route: ", limits: {responseTimeout: 0s}"))
        #expect(zero.contains { $0.contains("routes[0].limits.responseTimeout: must be greater than 0") }, "\(zero)")
        let size = ConfigText.errors(Self.yaml(route: ", limits: {maxRequestBodyBytes: lots}"))
        #expect(size.contains { $0.contains("routes[0].limits.maxRequestBodyBytes: invalid size 'lots'") }, "\(size)")
    }

    @Test func aBufferedBodyCapFitsTheRoutesOwnBodyLimit() throws {
        // Above the global 16 MiB, allowed by the route's own limit.
        let c = try ConfigText.load(Self.yaml(route: ", maxBodyBytes: 32MiB, limits: {maxRequestBodyBytes: 64MiB}"))
        #expect(c.routes[0].maxBodyBytes == 32 << 20)
        // Below it, the default 1 MiB cap shrinks to the route's limit.
        let small = try ConfigText.load(Self.yaml(route: ", limits: {maxRequestBodyBytes: 4KiB}"))
        #expect(small.routes[0].maxBodyBytes == 4 << 10)
        let e = ConfigText.errors(Self.yaml(route: ", maxBodyBytes: 8KiB, limits: {maxRequestBodyBytes: 4KiB}"))
        #expect(
            e.contains { $0.contains("routes[0].maxBodyBytes: 8KiB exceeds routes[0].limits.maxRequestBodyBytes (4KiB)") }, "\(e)")
    }
}
