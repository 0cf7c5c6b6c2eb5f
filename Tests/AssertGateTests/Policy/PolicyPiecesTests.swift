import Foundation
import Testing
import Verifier
@testable import AssertGateCore

@Suite struct ClientDataTests {
    @Test func assertClientDataIsByteExact() {
        let bytes = ClientData.assert(
            method: "POST", path: "/api/pay?x=1&y=%20", challenge: nil,
            bodyHash: Hex.encode(SHA256.hash([UInt8]())))
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "assertgate-assert-v1\nPOST\n/api/pay?x=1&y=%20\n\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        )
    }

    @Test func attestClientDataTreatsMissingUserAsEmpty() {
        let c = String(repeating: "a", count: 43)
        #expect(ClientData.attest(challenge: c, userId: nil) == Array("assertgate-attest-v1\n\(c)\n".utf8))
        #expect(ClientData.attest(challenge: c, userId: "ü") == Array("assertgate-attest-v1\n\(c)\nü".utf8))
    }
}

@Suite struct PercentEncodingTests {
    @Test func encodesEverythingButUnreserved() {
        #expect(PercentEncoding.encode("Az09-._~") == "Az09-._~")
        #expect(PercentEncoding.encode("a b/ü") == "a%20b%2F%C3%BC")
    }
}

@Suite struct ChallengeCodecTests {
    @Test func acceptsOnlyCanonical43CharB64URL() {
        let random = Base64.encodeURL((0..<32).map { UInt8($0 * 7) })
        #expect(random.utf8.count == 43)
        #expect(ChallengeCodec.isWellFormed(random))
        #expect(!ChallengeCodec.isWellFormed(random + "="))
        #expect(!ChallengeCodec.isWellFormed(String(random.dropLast())))
        #expect(!ChallengeCodec.isWellFormed(String(random.dropLast()) + "+"))
        // Last char with low bits set is not the encoding of 32 bytes.
        #expect(!ChallengeCodec.isWellFormed(String(random.dropLast()) + "B"))
    }
}

/// The reason a throwing policy step rejected with, or nil when it passed.
func rejectionReason(_ body: () throws(Rejection) -> Void) -> ReasonToken? {
    do {
        try body()
        return nil
    } catch {
        return error.reason
    }
}

@Suite struct RouteRequestsTests {
    let keyId = (0..<32).map { UInt8($0) }

    @Test func parsesChallengeRequestWithEitherAlphabet() throws {
        for encoded in [Base64.encode(keyId), Base64.encodeURL(keyId)] {
            let body = Array(#"{"keyId":"\#(encoded)","purpose":"assert"}"#.utf8)
            let req = try ChallengeRequest.parse(body)
            #expect(req.keyId == keyId)
            #expect(req.purpose == .assert)
        }
    }

    @Test(arguments: [
        #"{"keyId":"AAAA","purpose":"assert"}"#,
        #"{"purpose":"assert"}"#,
        #"{"keyId":5,"purpose":"assert"}"#,
        #"{"keyId":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=","purpose":"other"}"#,
        #"not json"#,
        #"[]"#,
    ])
    func rejectsMalformedChallengeRequests(_ body: String) {
        #expect(rejectionReason { () throws(Rejection) in _ = try ChallengeRequest.parse(Array(body.utf8)) } == .malformedRequest)
    }

    @Test func rejectsOversizedBodies() {
        let big = [UInt8](repeating: 0x20, count: ChallengeRequest.maxBodyBytes + 1)
        #expect(rejectionReason { () throws(Rejection) in _ = try ChallengeRequest.parse(big) } == .bodyTooLarge)
    }

    @Test func parsesAttestRequestAndNormalisesUserId() throws {
        let ch = Base64.encodeURL([UInt8](repeating: 9, count: 32))
        let body = #"{"keyId":"\#(Base64.encode(keyId))","challenge":"\#(ch)","attestation":"AAEC","userId":""}"#
        let req = try AttestRequest.parse(Array(body.utf8))
        #expect(req.userId == nil)
        #expect(req.attestation == [0, 1, 2])
        #expect(req.challenge == ch)
        let withNull = #"{"keyId":"\#(Base64.encode(keyId))","challenge":"\#(ch)","attestation":"AAEC","userId":null}"#
        #expect(try AttestRequest.parse(Array(withNull.utf8)).userId == nil)
    }

    @Test func rejectsBadAttestFields() {
        let ch = Base64.encodeURL([UInt8](repeating: 9, count: 32))
        let k = Base64.encode(keyId)
        for body in [
            #"{"keyId":"\#(k)","challenge":"short","attestation":"AAEC"}"#,
            #"{"keyId":"\#(k)","challenge":"\#(ch)","attestation":"**"}"#,
            #"{"keyId":"\#(k)","challenge":"\#(ch)"}"#,
            #"{"keyId":"\#(k)","challenge":"\#(ch)","attestation":"AAEC","userId":7}"#,
            #"{"keyId":"\#(k)","challenge":"\#(ch)","attestation":"AAEC","userId":"\#(String(repeating: "x", count: 257))"}"#,
        ] {
            #expect(rejectionReason { () throws(Rejection) in _ = try AttestRequest.parse(Array(body.utf8)) } == .malformedRequest)
        }
    }
}

@Suite struct TokenBucketTests {
    @Test func allowsBurstThenLimitsWithRetryAfter() {
        var b = TokenBucket(perSecond: 2, burst: 3, nowNanos: 0)
        for _ in 0..<3 { #expect(b.take(nowNanos: 0) == .allowed) }
        #expect(b.take(nowNanos: 0) == .limited(retryAfterSeconds: 1))
        // Half a second at 2/s refills one token.
        #expect(b.take(nowNanos: 500_000_000) == .allowed)
        #expect(b.take(nowNanos: 500_000_000) != .allowed)
    }

    @Test func limiterIsPerPeerAndBounded() {
        var l = PeerRateLimiter(perSecond: 1, burst: 1, maxPeers: 8)
        #expect(l.take(peer: "a", nowNanos: 0) == .allowed)
        #expect(l.take(peer: "a", nowNanos: 0) != .allowed)
        #expect(l.take(peer: "b", nowNanos: 0) == .allowed)
        for i in 0..<100 { _ = l.take(peer: "p\(i)", nowNanos: 0) }
        #expect(l.trackedPeers <= 8)
    }

    /// Requests on the snapshots before and after a reload, alternating:
    /// only the newer rate resets the buckets, once.
    @Test func aSharedLimiterFollowsOnlyNewerSnapshots() {
        let before = RateConfig(perSecond: 100, burst: 100)
        let after = RateConfig(perSecond: 0.001, burst: 3)
        let l = SharedPeerRateLimiter(rate: before)
        #expect(l.take(peer: "a", rate: before, generation: 1, nowNanos: 0) == .allowed)
        var allowed = 0
        for i in 0..<10 {
            let (rate, generation): (RateConfig, UInt64) = i % 2 == 0 ? (after, 2) : (before, 1)
            if l.take(peer: "a", rate: rate, generation: generation, nowNanos: 0) == .allowed { allowed += 1 }
        }
        #expect(allowed == 3, "the older snapshot's requests refilled the buckets")
    }
}

@Suite struct TrustSignerTests {
    /// Checks the HMAC with an independent implementation: the `openssl` CLI.
    @Test func signatureMatchesOpenSSLCommandLine() throws {
        let signer = TrustSigner(secret: "s3cret", headerPrefix: "X-AssertGate-")
        let headers: [(name: String, value: String)] = [
            ("X-AssertGate-Trust", "verified"), ("X-AssertGate-Env", "production"),
            ("X-AssertGate-Key-Id", "abc"), ("X-Forwarded-For", "127.0.0.1"),
        ]
        let sig = signer.signature(
            timestamp: 1_700_000_000, requestId: "rid-1", method: "GET", path: "/api/x?y=1", trustHeaders: headers)
        let message =
            "1700000000\nrid-1\nGET\n/api/x?y=1\nx-assertgate-env:production\nx-assertgate-key-id:abc\nx-assertgate-trust:verified\n"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = ["dgst", "-sha256", "-hmac", "s3cret", "-r"]
        let input = Pipe()
        let output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        input.fileHandleForWriting.write(Data(message.utf8))
        try input.fileHandleForWriting.close()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let hex = String(out.prefix(64))
        #expect(sig == "t=1700000000, v1=\(hex)")
    }
}
