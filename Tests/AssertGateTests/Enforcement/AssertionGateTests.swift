import DeviceSim
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
import Verifier

@testable import AssertGateCore

/// The gate on its own: real signatures from a simulated device, a
/// `MemoryStore` on an embedded loop, decisions read as typed values. The
/// integration suite runs the same policy through sockets and Redis.
@Suite struct AssertionGateTests {
    static let appId = "ABCDE12345.com.example.gate"

    final class Fixture {
        static let challenge = String(repeating: "A", count: 43)
        let loop = EmbeddedEventLoop()
        let store: MemoryStore
        let gate: AssertionGate
        let snapshot: GatewaySnapshot
        let device: SimDevice

        init(mode: PolicyMode = .enforce, bindBody: Bool = false) throws {
            var route = RouteConfig(match: RouteMatch(kind: .prefix("/api/")), upstream: "u", mode: mode)
            route.bindBody = bindBody
            let config = GatewayConfig(
                listeners: [], apps: [AppConfig(appId: AssertionGateTests.appId)],
                upstreams: ["u": UpstreamConfig(endpoints: [])], routes: [route])
            snapshot = GatewaySnapshot(config: config, enforcement: try EnforcementContext(config: config))
            store = MemoryStore(eventLoop: loop)
            gate = AssertionGate(eventLoop: loop, store: store, metrics: nil)
            device = try SimDevice(ca: try TestCA(), receiptCA: try ReceiptCA())
        }

        var route: RouteConfig { snapshot.config.routes[0] }

        /// Stores the device's key as an attestation would have.
        func register() throws {
            _ = try store.issueChallenge(keyId: device.keyId, purpose: .attest, challenge: Self.challenge, ttl: .seconds(60))
                .wait()
            let record = NewKeyRecord(
                keyId: device.keyId, publicKey: device.publicKey, appId: AssertionGateTests.appId,
                environment: .production, createdAt: 1)
            let result = try store.registerKey(record, attestChallenge: Self.challenge).wait()
            #expect(result == .registered(userKeyCount: 0))
        }

        func request(_ path: String = "/api/pay", counter: UInt32?, mutation: AssertionMutation? = nil) throws
            -> ProxyRequest
        {
            var headers = HTTPHeaders()
            if let counter {
                let clientData = ClientData.assert(
                    method: "POST", path: path, challenge: nil, bodyHash: ClientData.unsignedPayload)
                let assertion = try device.assert(
                    clientDataHash: SHA256.hash(clientData), appId: AssertionGateTests.appId, counter: counter,
                    mutation: mutation)
                let names = AssertionHeaderNames()
                headers.add(name: names.keyId, value: device.keyIdBase64URL)
                headers.add(name: names.assertion, value: Data(assertion).base64EncodedString())
            }
            return ProxyRequest(
                method: "POST", target: path, authority: "gw", scheme: "https", headers: headers, requestId: "r",
                clientAddress: nil, snapshot: snapshot)
        }

        func decide(_ request: ProxyRequest, body: ByteBuffer? = nil) throws -> GateDecision {
            switch gate.evaluate(request, route: route, body: body) {
            case .decided(let d): return d
            case .pending(let future):
                loop.run()
                return try future.wait()
            }
        }
    }

    private func rejection(_ d: GateDecision) -> Rejection? {
        if case .reject(let r) = d { return r }
        return nil
    }

    private func outcome(_ d: GateDecision) -> TrustOutcome? {
        if case .forward(let o) = d { return o }
        return nil
    }

    @Test func verifiedAssertionForwardsTheIdentity() throws {
        let f = try Fixture()
        try f.register()
        let d = try f.decide(try f.request(counter: 1))
        guard case .verified(let id)? = outcome(d) else { Issue.record("not verified: \(d)"); return }
        #expect(id.keyId == f.device.keyId)
        #expect(id.environment == "production")
    }

    @Test func replayedCounterIsRefusedInEnforceAndFlaggedInMonitor() throws {
        let f = try Fixture()
        try f.register()
        _ = try f.decide(try f.request(counter: 5))
        #expect(rejection(try f.decide(try f.request(counter: 5)))?.reason == .counterReplay)
        #expect(rejection(try f.decide(try f.request(counter: 4)))?.reason == .counterReplay)

        let m = try Fixture(mode: .monitor)
        try m.register()
        _ = try m.decide(try m.request(counter: 5))
        #expect(outcome(try m.decide(try m.request(counter: 5))) == .invalid(.counterReplay))
    }

    @Test func aForgedSignatureBurnsNoCounter() throws {
        let f = try Fixture()
        try f.register()
        let forged = try f.decide(try f.request(counter: 9, mutation: .badSignature))
        #expect(rejection(forged)?.reason == .badSignature)
        // The signature is checked before the store: counter 9 is still free.
        guard case .verified? = outcome(try f.decide(try f.request(counter: 9))) else {
            Issue.record("counter 9 was consumed by a forged assertion")
            return
        }
    }

    @Test func missingHeadersAndUnknownKeys() throws {
        let f = try Fixture()
        let missing = rejection(try f.decide(try f.request(counter: nil)))
        #expect(missing?.reason == .missingAssertion)
        #expect(missing?.detail.isEmpty == false)
        // Not registered: the store has no such key.
        #expect(rejection(try f.decide(try f.request(counter: 1)))?.reason == .unknownKey)

        let m = try Fixture(mode: .monitor)
        #expect(outcome(try m.decide(try m.request(counter: nil))) == .missing(.missingAssertion))
    }

    @Test func passthroughRoutesNeverAskTheStore() throws {
        let f = try Fixture(mode: .passthrough)
        // No key stored, a valid-looking assertion: passthrough ignores it.
        #expect(outcome(try f.decide(try f.request(counter: 1))) == TrustOutcome.none)
    }

    @Test func bodyPolicyBuffersOnlyWhatCanVerify() throws {
        let f = try Fixture(bindBody: true)
        #expect(f.gate.bodyPolicy(for: try f.request(counter: 1), route: f.route) == .buffer(limit: f.route.maxBodyBytes))
        // No headers: decided from the head, the body streams.
        #expect(f.gate.bodyPolicy(for: try f.request(counter: nil), route: f.route) == .stream)
        let unbound = try Fixture(bindBody: false)
        #expect(unbound.gate.bodyPolicy(for: try unbound.request(counter: 1), route: unbound.route) == .stream)
    }

    @Test func aBoundBodyThatDiffersFromTheSignedOneFails() throws {
        let f = try Fixture(bindBody: true)
        try f.register()
        // The assertion signs UNSIGNED-PAYLOAD, the route binds the body: the hashes differ.
        let d = try f.decide(try f.request(counter: 1), body: ByteBuffer(string: "{}"))
        #expect(rejection(d)?.reason == .badSignature)
    }
}
