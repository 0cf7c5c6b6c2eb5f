import Testing
import Verifier

@testable import AssertGateCore

/// DeviceCheck's answer folded into the gate's decision (risk.md §2, §3, §6),
/// every combination on typed values.
@Suite struct DevicePolicyTests {
    private func route(
        _ mode: PolicyMode, fallback: RouteFallback? = nil, require: DeviceBitsRule? = nil, flag: DeviceBitsRule? = nil,
        onError: StoreErrorAction? = nil
    ) -> RouteConfig {
        var r = RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "u", mode: mode)
        r.deviceCheck = .query
        r.fallback = fallback
        r.rules.require.deviceBits = require
        r.rules.flag.deviceBits = flag
        if let onError { r.onDeviceCheckError = onError }
        return r
    }

    private let verified = GateDecision.forward(
        .verified(VerifiedIdentity(keyId: [1], environment: "production", flags: [.tooManyKeys])))
    private let missingEnforce = GateDecision.reject(Rejection(.missingAssertion))
    private let missingMonitor = GateDecision.forward(.missing(.missingAssertion))
    private let set01 = DeviceSignal.valid(bits: .set(bit0: false, bit1: true, updated: "2026-11"))

    private func reason(_ d: GateDecision) -> ReasonToken? {
        switch d {
        case .reject(let r): return r.reason
        case .forward(let o): return o.reason
        }
    }

    private func outcome(_ d: GateDecision) -> TrustOutcome? {
        if case .forward(let o) = d { return o }
        return nil
    }

    @Test func fallbackGivesDeviceTrustToAValidFirstUseToken() {
        let r = route(.enforce, fallback: .device)
        #expect(outcome(DevicePolicy.decide(missingEnforce, asserted: false, device: set01, route: r)) == .device(flags: []))
        // No token: the gate's answer stands.
        #expect(reason(DevicePolicy.decide(missingEnforce, asserted: false, device: .missing, route: r)) == .missingAssertion)
        // An asserted request is judged by its assertion alone.
        #expect(reason(DevicePolicy.decide(missingEnforce, asserted: true, device: set01, route: r)) == .missingAssertion)
    }

    @Test func badTokensAreRefusedInEnforceAndFlaggedInMonitor() {
        for (signal, token) in [(DeviceSignal.invalid, ReasonToken.invalidDeviceToken), (.reused, .deviceTokenReused)] {
            let enforce = DevicePolicy.decide(missingEnforce, asserted: false, device: signal, route: route(.enforce, fallback: .device))
            guard case .reject(let r) = enforce else { Issue.record("not refused: \(enforce)"); continue }
            #expect(r.reason == token)
            #expect(r.status == 403)
            let monitor = DevicePolicy.decide(missingMonitor, asserted: false, device: signal, route: route(.monitor, fallback: .device))
            #expect(outcome(monitor) == .invalid(token))
        }
    }

    @Test func appleDownFollowsOnDeviceCheckError() {
        let reject = DevicePolicy.decide(missingEnforce, asserted: false, device: .unavailable, route: route(.enforce, fallback: .device))
        guard case .reject(let r) = reject else { Issue.record("not refused"); return }
        #expect(r.reason == .devicecheckUnavailable)
        #expect(r.status == 503)
        let forward = DevicePolicy.decide(
            missingEnforce, asserted: false, device: .unavailable, route: route(.enforce, fallback: .device, onError: .forward))
        #expect(outcome(forward) == .unavailable(.devicecheckUnavailable))
    }

    @Test func requiredBitsRefuseOrPass() {
        let r = route(.enforce, require: DeviceBitsRule(bit1: false))
        #expect(reason(DevicePolicy.decide(verified, asserted: true, device: set01, route: r)) == .deviceBitsNotAllowed)
        let passing = route(.enforce, require: DeviceBitsRule(bit0: false, bit1: true))
        guard case .verified(let id)? = outcome(DevicePolicy.decide(verified, asserted: true, device: set01, route: passing))
        else { Issue.record("not verified"); return }
        #expect(id.flags == [.tooManyKeys])
        // Unset bits count as both false.
        let unset = DeviceSignal.valid(bits: .unset)
        #expect(reason(DevicePolicy.decide(verified, asserted: true, device: unset, route: r)) == nil)
        #expect(
            reason(DevicePolicy.decide(verified, asserted: true, device: unset, route: route(.enforce, require: DeviceBitsRule(bit0: true))))
                == .deviceBitsNotAllowed)
    }

    /// `assertgate_rule_results_total{rule="deviceBits"}`: each rule
    /// evaluated is seen once, with its result.
    @Test func deviceBitsResultsAreObserved() {
        func observed(_ r: RouteConfig, _ device: DeviceSignal) -> [String] {
            var seen: [String] = []
            _ = DevicePolicy.decide(verified, asserted: true, device: device, route: r) { seen.append("\($0.name)=\($1.name)") }
            return seen
        }
        let wantBit1 = DeviceBitsRule(bit0: nil, bit1: true)
        let wantBit0 = DeviceBitsRule(bit0: true, bit1: nil)
        #expect(observed(route(.enforce, require: wantBit1), set01) == ["deviceBits=pass"])
        #expect(observed(route(.enforce, require: wantBit0), set01) == ["deviceBits=reject"])
        #expect(observed(route(.enforce, flag: wantBit0), set01) == ["deviceBits=flag"])
        #expect(observed(route(.enforce, require: wantBit1, flag: wantBit1), set01) == ["deviceBits=pass", "deviceBits=pass"])
        #expect(observed(route(.enforce), set01).isEmpty)
    }

    @Test func theTokensProblemComesBeforeTheBits() {
        let r = route(.enforce, require: DeviceBitsRule(bit1: false))
        #expect(reason(DevicePolicy.decide(verified, asserted: true, device: .missing, route: r)) == .missingDeviceToken)
        #expect(reason(DevicePolicy.decide(verified, asserted: true, device: .reused, route: r)) == .deviceTokenReused)
        #expect(reason(DevicePolicy.decide(verified, asserted: true, device: .invalid, route: r)) == .invalidDeviceToken)
        let down = DevicePolicy.decide(verified, asserted: true, device: .unavailable, route: r)
        guard case .reject(let rej) = down else { Issue.record("not refused"); return }
        #expect(rej.reason == .devicecheckUnavailable)
        // In monitor a failed bits rule forwards as invalid, without identity.
        let m = DevicePolicy.decide(verified, asserted: true, device: set01, route: route(.monitor, require: DeviceBitsRule(bit1: false)))
        #expect(outcome(m) == .invalid(.deviceBitsNotAllowed))
    }

    @Test func flagRulesNeverRefuseAndComeLast() {
        let r = route(.enforce, flag: DeviceBitsRule(bit1: false))
        guard case .verified(let id)? = outcome(DevicePolicy.decide(verified, asserted: true, device: set01, route: r))
        else { Issue.record("not verified"); return }
        #expect(id.flags == [.tooManyKeys, .deviceBitsNotAllowed])
        // Even DeviceCheck being down is only listed.
        guard case .verified(let down)? = outcome(DevicePolicy.decide(verified, asserted: true, device: .unavailable, route: r))
        else { Issue.record("not verified"); return }
        #expect(down.flags == [.tooManyKeys, .devicecheckUnavailable])
        // Device trust carries flags too.
        let fallback = route(.enforce, fallback: .device, flag: DeviceBitsRule(bit1: false))
        #expect(outcome(DevicePolicy.decide(missingEnforce, asserted: false, device: set01, route: fallback)) == .device(flags: [.deviceBitsNotAllowed]))
    }

    @Test func otherDecisionsAreLeftAlone() {
        let r = route(.enforce, require: DeviceBitsRule(bit1: false))
        let refused = GateDecision.reject(Rejection(.badSignature))
        #expect(reason(DevicePolicy.decide(refused, asserted: true, device: set01, route: r)) == .badSignature)
        let invalid = GateDecision.forward(.invalid(.counterReplay))
        #expect(outcome(DevicePolicy.decide(invalid, asserted: true, device: set01, route: r)) == .invalid(.counterReplay))
    }
}

@Suite struct DeviceHeaderTests {
    private let builder = TrustHeaderBuilder(prefix: "X-AssertGate-", signingSecret: nil)

    private func render(_ outcome: TrustOutcome, _ device: DeviceSignal?) -> [String: String] {
        Dictionary(
            uniqueKeysWithValues: builder.headers(for: outcome, device: device, requestId: "r", method: "GET", path: "/", now: 1)
                .map { ($0.name, $0.value) })
    }

    @Test func deviceHeadersGoOnEveryTrustLevel() {
        let h = render(.invalid(.badSignature), .valid(bits: .set(bit0: true, bit1: false, updated: "2026-10")))
        #expect(h["X-AssertGate-Trust"] == "invalid")
        #expect(h["X-AssertGate-Device"] == "valid")
        #expect(h["X-AssertGate-Device-Bits"] == "bit0=1, bit1=0, updated=2026-10")
        #expect(h["X-AssertGate-Key-Id"] == nil)
        #expect(render(.none, .valid(bits: .unset))["X-AssertGate-Device-Bits"] == "unset")
        // Bits only with a valid token; none after validate.
        #expect(render(.none, .reused)["X-AssertGate-Device-Bits"] == nil)
        #expect(render(.none, .reused)["X-AssertGate-Device"] == "reused")
        #expect(render(.none, .valid(bits: nil))["X-AssertGate-Device-Bits"] == nil)
    }

    @Test func deviceTrustWithFlags() {
        let h = render(.device(flags: [.deviceBitsNotAllowed]), .valid(bits: .set(bit0: false, bit1: true, updated: nil)))
        #expect(h["X-AssertGate-Trust"] == "device")
        #expect(h["X-AssertGate-Flags"] == "device-bits-not-allowed")
        #expect(h["X-AssertGate-Device-Bits"] == "bit0=0, bit1=1")
        #expect(h["X-AssertGate-Reason"] == nil)
    }

    @Test func signedDeviceHeadersAreCovered() {
        let signed = TrustHeaderBuilder(prefix: "X-AssertGate-", signingSecret: "k")
        let a = signed.headers(for: .none, device: .valid(bits: .unset), requestId: "r", method: "GET", path: "/", now: 1)
        let b = signed.headers(for: .none, device: .reused, requestId: "r", method: "GET", path: "/", now: 1)
        #expect(a.last?.name == "X-AssertGate-Signature")
        #expect(a.last?.value != b.last?.value)
    }
}
