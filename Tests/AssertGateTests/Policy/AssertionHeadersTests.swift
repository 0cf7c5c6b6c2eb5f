import Testing
import Verifier
@testable import AssertGateCore

@Suite struct AssertionHeadersTests {
    let names = AssertionHeaderNames()
    let keyId = Base64.encode([UInt8](repeating: 7, count: 32))
    let challenge = Base64.encodeURL([UInt8](repeating: 3, count: 32))

    func parse(_ headers: [String: String], challengeRequired: Bool = false) -> Result<AssertionHeaders, Rejection> {
        Result { () throws(Rejection) in
            try AssertionHeaders.parse(names: names, challengeRequired: challengeRequired) { headers[$0] }
        }
    }

    @Test func acceptsWellFormedHeaders() throws {
        let r = try parse(
            ["assertgate-key-id": keyId, "assertgate-assertion": "oWFhAQ==", "assertgate-challenge": challenge],
            challengeRequired: true
        ).get()
        #expect(r.keyId == [UInt8](repeating: 7, count: 32))
        #expect(r.assertion == [0xA1, 0x61, 0x61, 0x01])
        #expect(r.challenge == challenge)
    }

    @Test func missingOrEmptyHeadersAreMissingAssertion() {
        #expect(parse([:]).failureReason == .missingAssertion)
        #expect(parse(["assertgate-key-id": keyId]).failureReason == .missingAssertion)
        #expect(parse(["assertgate-key-id": keyId, "assertgate-assertion": ""]).failureReason == .missingAssertion)
    }

    @Test func challengeRequiredButAbsent() {
        let h = ["assertgate-key-id": keyId, "assertgate-assertion": "oWFhAQ=="]
        #expect(parse(h, challengeRequired: true).failureReason == .missingChallenge)
        // A challenge header on a route without one is ignored, even malformed.
        var extra = h
        extra["assertgate-challenge"] = "junk"
        #expect(parse(extra).failureReason == nil)
    }

    @Test func malformedHeaders() {
        let base = ["assertgate-key-id": keyId, "assertgate-assertion": "oWFhAQ==", "assertgate-challenge": challenge]
        var short = base
        short["assertgate-key-id"] = "AAAA"
        #expect(parse(short).failureReason == .malformedHeader)
        var junk = base
        junk["assertgate-assertion"] = "%%%"
        #expect(parse(junk).failureReason == .malformedHeader)
        var huge = base
        huge["assertgate-assertion"] = Base64.encode([UInt8](repeating: 1, count: 4097))
        #expect(parse(huge).failureReason == .malformedHeader)
        var padded = base
        padded["assertgate-challenge"] = challenge + "="
        #expect(parse(padded, challengeRequired: true).failureReason == .malformedHeader)
    }
}

extension Result where Failure == Rejection {
    var failureReason: ReasonToken? {
        if case .failure(let r) = self { return r.reason }
        return nil
    }
}

@Suite struct TrustHeaderBuilderTests {
    @Test func identityHeadersOnlyWhenVerified() {
        let b = TrustHeaderBuilder(prefix: "X-AssertGate-", signingSecret: nil)
        let invalid = b.headers(for: .invalid(.counterReplay), requestId: "r", method: "GET", path: "/", now: 1)
        #expect(invalid.map(\.name) == ["X-AssertGate-Trust", "X-AssertGate-Reason"])
        #expect(invalid.map(\.value) == ["invalid", "counter-replay"])
        let id = VerifiedIdentity(
            keyId: [UInt8](repeating: 0xFF, count: 32), environment: "production", userId: "a b",
            userKeyCount: 2, riskMetric: 4, riskMetricAgeSeconds: 30, appVersion: "1.2", launchCategory: 1,
            keyPolicy: .other, flags: [.tooManyKeys, .riskTooHigh])
        let verified = Dictionary(
            uniqueKeysWithValues: b.headers(for: .verified(id), requestId: "r", method: "GET", path: "/", now: 1)
                .map { ($0.name, $0.value) })
        #expect(verified["X-AssertGate-Trust"] == "verified")
        #expect(verified["X-AssertGate-Reason"] == nil)
        #expect(verified["X-AssertGate-Key-Id"] == String(repeating: "_", count: 42) + "8")
        #expect(verified["X-AssertGate-User"] == "a%20b")
        #expect(verified["X-AssertGate-User-Keys"] == "2")
        #expect(verified["X-AssertGate-Risk-Metric"] == "4; age=30")
        #expect(verified["X-AssertGate-App-Version"] == "1.2")
        // risk.md §2 headers: the category's name, the key policy, flags in order.
        #expect(verified["X-AssertGate-Launch-Category"] == "platform")
        #expect(verified["X-AssertGate-Key-Policy"] == "other")
        #expect(verified["X-AssertGate-Flags"] == "too-many-keys, risk-too-high")
        var unnamed = id
        unnamed.launchCategory = 4_000_000_000
        unnamed.keyPolicy = nil
        unnamed.flags = []
        let names = b.headers(for: .verified(unnamed), requestId: "r", method: "GET", path: "/", now: 1).map(\.name)
        #expect(b.headers(for: .verified(unnamed), requestId: "r", method: "GET", path: "/", now: 1)
            .first { $0.name == "X-AssertGate-Launch-Category" }?.value == "4000000000")
        #expect(!names.contains("X-AssertGate-Key-Policy"))
        #expect(!names.contains("X-AssertGate-Flags"))
    }

    @Test func signatureCoversAddedHeadersWithCustomPrefix() {
        let b = TrustHeaderBuilder(prefix: "X-Gw-", signingSecret: "k")
        let h = b.headers(for: .unavailable(.storeUnavailable), requestId: "r", method: "GET", path: "/p", now: 5)
        #expect(h.last?.name == "X-Gw-Signature")
        let expected = TrustSigner(secret: "k", headerPrefix: "X-Gw-").signature(
            timestamp: 5, requestId: "r", method: "GET", path: "/p",
            trustHeaders: [("X-Gw-Trust", "unavailable"), ("X-Gw-Reason", "store-unavailable")])
        #expect(h.last?.value == expected)
    }
}

@Suite struct TrustHeaderFastPathTests {
    @Test func unsignedNoneIsTheOneTrustHeader() {
        let unsigned = TrustHeaderBuilder(prefix: "X-Edge-", signingSecret: nil)
        let none = unsigned.headers(for: .none, requestId: "r", method: "GET", path: "/", now: 1)
        #expect(none.map(\.name) == ["X-Edge-Trust"])
        #expect(none.map(\.value) == ["none"])
        // Signed passthrough headers depend on the request: never the fixed list.
        let signed = TrustHeaderBuilder(prefix: "X-Edge-", signingSecret: "s")
        let a = signed.headers(for: .none, requestId: "r1", method: "GET", path: "/", now: 1)
        let b = signed.headers(for: .none, requestId: "r2", method: "GET", path: "/", now: 1)
        #expect(a.map(\.name) == ["X-Edge-Trust", "X-Edge-Signature"])
        #expect(a.last?.value != b.last?.value)
    }
}
