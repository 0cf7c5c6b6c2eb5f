import Logging
import NIOCore
import NIOEmbedded
import Testing
import Verifier

@testable import AssertGateCore

/// A gate that buffers up to 16 bytes and decides on the body: "bad" → 403
/// bad-signature (with a Retry-After, to see the rejection's headers), "slow" → decides asynchronously, anything else → forward.
final class BodyGate: RequestGate {
    let loop: EventLoop
    var seenBodies: [String] = []
    var pending: [EventLoopPromise<GateDecision>] = []
    init(loop: EventLoop) { self.loop = loop }
    func bodyPolicy(for request: ProxyRequest, route: RouteConfig) -> GateBodyPolicy { .buffer(limit: 16) }
    func evaluate(_ request: ProxyRequest, route: RouteConfig, body: ByteBuffer?) -> GateOutcome {
        let text = body.map { String(buffer: $0) } ?? "<nil>"
        seenBodies.append(text)
        switch text {
        case "bad": return .decided(.reject(Rejection(.badSignature, "signature does not verify", retryAfter: 7)))
        case "slow":
            let p = loop.makePromise(of: GateDecision.self)
            pending.append(p)
            return .pending(p.futureResult)
        default:
            return .decided(.forward(.verified(VerifiedIdentity(keyId: Array(repeating: 1, count: 32), environment: "production"))))
        }
    }
}

@Suite struct RequestGateTests {
    private func fixture() throws -> (H2Fixture, BodyGate) {
        let f = try H2Fixture { c in
            c.routes = [RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "u", mode: .enforce)]
        }
        f.worker.localHandlers = []
        let gate = BodyGate(loop: f.channel.embeddedEventLoop)
        f.worker.gate = gate
        return (f, gate)
    }

    @Test func rejectAnswersTheRejectionsProblem() throws {
        let (f, gate) = try fixture()
        let sid = f.client.request("POST", "/pay", body: Array("bad".utf8))
        try f.run()
        let r = try #require(f.client.responses[sid])
        #expect(r.status == "403")
        #expect(r.header("retry-after") == "7")
        #expect(r.header("content-type") == "application/problem+json")
        #expect(r.bodyString.contains("\"reason\":\"bad-signature\""))
        #expect(r.bodyString.contains("\"detail\":\"signature does not verify\""))
        #expect(gate.seenBodies == ["bad"])
    }

    @Test func bodyOverTheGateLimitIs413WithoutCallingTheGate() throws {
        let (f, gate) = try fixture()
        let sid = f.client.request("POST", "/pay", body: Array(repeating: 0x41, count: 17))
        try f.run()
        #expect(f.client.responses[sid]?.status == "413")
        #expect(gate.seenBodies.isEmpty)
    }

    @Test func asyncDecisionThenForward() throws {
        let (f, gate) = try fixture()
        let sid = f.client.request("POST", "/pay", body: Array("slow".utf8))
        try f.run()
        #expect(f.client.responses[sid]?.status == nil)  // still deciding
        gate.pending.first?.succeed(.reject(Rejection(.counterReplay)))
        try f.run()
        #expect(f.client.responses[sid]?.status == "403")
        #expect(f.client.responses[sid]?.bodyString.contains("counter-replay") == true)
    }

    @Test func forwardGoesUpstream() throws {
        let (f, gate) = try fixture()
        // The fixture's upstream has no endpoints: a forwarded request ends in 502.
        let sid = f.client.request("POST", "/pay", body: Array("ok".utf8))
        try f.run()
        #expect(gate.seenBodies == ["ok"])
        #expect(f.client.responses[sid]?.status == "502")
        #expect(f.client.responses[sid]?.bodyString.contains("upstream-unavailable") == true)
    }
}
