import NIOCore
import NIOHTTP1
import Testing

@testable import AssertGateCore

/// The pieces behind the hardening: the request-body clock, the underscore
/// reading of header names, `/readyz` with an exhausted upstream pool.
@Suite struct HardeningPiecesTests {
    @Test func aBodyHeldBackByTheGatewayIsNotTheClientsFault() {
        // Unit view of the clock: a body arriving fast enough never times out; one
        // held back (restart) starts over.
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var clock = BodyClock(now: t0, timeout: .seconds(1), minRate: 1000, received: 0)
        #expect(clock.deadline(received: 0) == t0 + .seconds(1))
        clock.received(at: t0 + .milliseconds(900))
        // 5000 bytes at 1000 B/s may take 5 s; the quiet deadline comes first.
        #expect(clock.deadline(received: 5000) == t0 + .milliseconds(1900))
        // 10 bytes: the rate rule applies after the 1 s grace.
        #expect(clock.deadline(received: 10) == t0 + .seconds(1))
        clock.restart(now: t0 + .seconds(3), received: 10)
        #expect(clock.deadline(received: 10) == t0 + .seconds(4))
        let off = BodyClock(now: t0, timeout: .seconds(1), minRate: 0, received: 0)
        #expect(off.deadline(received: 0) == t0 + .seconds(1))
    }


    @Test func readyzSaysWhichUpstreamIsExhausted() async throws {
        let router = AdminRouter(
            token: nil, metrics: MetricsRegistry(), readiness: { true }, actions: nil,
            exhaustedUpstreams: { ["legacy (http://127.0.0.1:1 worker 1)"] })
        let r = await router.respond(to: AdminRequest(method: "GET", uri: "/readyz"))
        #expect(r.status == 503)
        #expect(r.body.contains("upstream-unavailable"))
        #expect(r.body.contains("legacy (http://127.0.0.1:1"))
    }


    @Test func underscoreNamesThatReadAsReservedOnesAreRecognised() {
        var c = GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [])
        c.trust.headerPrefix = "X-AssertGate-"
        let snapshot = GatewaySnapshot(config: c)
        #expect(HeaderRewriter.readsAsReserved("X_AssertGate_User", snapshot: snapshot))
        #expect(HeaderRewriter.readsAsReserved("x_forwarded_for", snapshot: snapshot))
        #expect(HeaderRewriter.readsAsReserved("X_Request_Id", snapshot: snapshot))
        #expect(!HeaderRewriter.readsAsReserved("My_Header", snapshot: snapshot))
    }

    @Test func absoluteFormTargetsSplitIntoAuthorityAndOriginForm() {
        let a = AbsoluteTarget("http://api.example.test:8080/v1/x?y=1")
        #expect(a?.authority == "api.example.test:8080")
        #expect(a?.originForm == "/v1/x?y=1")
        #expect(AbsoluteTarget("HTTPS://h?q")?.originForm == "/?q")
        #expect(AbsoluteTarget("http://h")?.originForm == "/")
        #expect(AbsoluteTarget("/plain") == nil)
        #expect(AbsoluteTarget("http://user@h/") == nil)
        #expect(AbsoluteTarget("http:///x") == nil)
    }
}
