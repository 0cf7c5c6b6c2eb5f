import AssertGateCore
import DeviceSim
import Foundation
import Testing
import Verifier

extension Integration {
    /// protocol.md §2–§3 and the gateway's own answers (§5) over real clients.
    @Suite(.serialized) struct AttestationRouteTests {
        @Test func everyAttestationFailureHasItsReasonAndStatus() async throws {
            let h = try await EnforcementHarness.start()
            for mutation in AttestationMutation.allCases {
                let device = try h.newDevice()
                let r = try await h.attest(device, mutation: mutation)
                let expectedStatus = ReasonToken(rawValue: mutation.expectedReason)?.httpStatus
                #expect(r.reason == mutation.expectedReason, "\(mutation): \(r.body)")
                #expect(r.status == expectedStatus, "\(mutation)")
                #expect(r.headers["content-type"] == "application/problem+json")
                // A refused attestation stores nothing and keeps its challenge unspent.
                #expect(try h.redis.run(["EXISTS", "ag:{\(device.keyIdBase64URL)}:key"]) == .integer(0))
            }
            // Development attestation for an App ID that allows production only.
            let dev = try h.newDevice()
            let refused = try await h.attest(dev, appId: EnforcementHarness.productionOnlyAppId)
            #expect(refused.status == 403)
            #expect(refused.reason == "environment-not-allowed")
            // Production is accepted there.
            let prod = try await h.attest(dev, appId: EnforcementHarness.productionOnlyAppId, environment: .production)
            #expect(prod.status == 201, "\(prod.body)")
            #expect(prod.json["environment"] as? String == "production")
            try await h.stop()
        }

        @Test func challengeAndAttestRequestRules() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            // Challenge answers: b64url of 32 bytes, TTL, no-store.
            let c = try await h.send("POST", EnforcementHarness.prefix + "/challenge", body: #"{"keyId":"\#(device.keyIdBase64URL)","purpose":"attest"}"#)
            #expect(c.status == 200)
            #expect(c.headers["cache-control"] == "no-store")
            #expect(c.json["expiresIn"] as? Int == 120)
            #expect(ChallengeCodec.isWellFormed(c.json["challenge"] as? String ?? ""))

            for body in [#"{"keyId":"AAAA","purpose":"attest"}"#, #"{"purpose":"attest"}"#, "nope", #"{"keyId":"\#(device.keyIdBase64)","purpose":"x"}"#] {
                let r = try await h.send("POST", EnforcementHarness.prefix + "/challenge", body: body)
                #expect(r.status == 400)
                #expect(r.reason == "malformed-request", "\(body)")
            }
            let tooBig = try await h.send("POST", EnforcementHarness.prefix + "/challenge", body: String(repeating: " ", count: 5000))
            #expect(tooBig.status == 413)
            #expect(tooBig.reason == "body-too-large")
            let wrongMethod = try await h.send("GET", EnforcementHarness.prefix + "/challenge")
            #expect(wrongMethod.status == 405)
            #expect(wrongMethod.reason == "method-not-allowed")
            #expect(wrongMethod.headers["allow"] == "POST")
            let unknownUnderPrefix = try await h.send("POST", EnforcementHarness.prefix + "/nope", body: "{}")
            #expect(unknownUnderPrefix.status == 404)
            #expect(unknownUnderPrefix.reason == "no-route")
            let noRoute = try await h.send("GET", "/nowhere")
            #expect(noRoute.status == 404)
            #expect(noRoute.reason == "no-route")

            // Attest bodies: bad base64, bytes that are not CBOR, a challenge never issued.
            let ch = try await h.challenge(for: device, purpose: "attest")
            let badB64 = try await h.send(
                "POST", EnforcementHarness.prefix + "/attest",
                body: #"{"keyId":"\#(device.keyIdBase64)","challenge":"\#(ch)","attestation":"***"}"#)
            #expect(badB64.reason == "malformed-request")
            let notCBOR = try await h.send(
                "POST", EnforcementHarness.prefix + "/attest",
                body: #"{"keyId":"\#(device.keyIdBase64)","challenge":"\#(ch)","attestation":"AAECAw=="}"#)
            #expect(notCBOR.status == 400)
            #expect(notCBOR.reason == "malformed-attestation")
            let neverIssued = try await h.attest(device, challenge: Verifier.Base64.encodeURL([UInt8](repeating: 7, count: 32)))
            #expect(neverIssued.status == 403)
            #expect(neverIssued.reason == "unknown-challenge")
            // Without a live challenge nothing of the attestation is read (no
            // chain or signature work for an unauthenticated request): bytes
            // that are not CBOR are refused for the challenge.
            let garbageNoChallenge = try await h.send(
                "POST", EnforcementHarness.prefix + "/attest",
                body: #"{"keyId":"\#(device.keyIdBase64)","challenge":"\#(Verifier.Base64.encodeURL([UInt8](repeating: 9, count: 32)))","attestation":"AAECAw=="}"#)
            #expect(garbageNoChallenge.status == 403)
            #expect(garbageNoChallenge.reason == "unknown-challenge")
            // The challenge issued above survived every failed attempt.
            let ok = try await h.attest(device, challenge: ch)
            #expect(ok.status == 201, "\(ok.body)")
            // Attested once: a second attestation of the same key is refused, its challenge kept.
            let again = try await h.attest(device)
            #expect(again.status == 409)
            #expect(again.reason == "key-exists")
            try await h.stop()
        }

        @Test func challengesAreRateLimitedPerPeer() async throws {
            let h = try await EnforcementHarness.start(.init(challengeRate: "{perSecond: 0.01, burst: 3}"))
            let device = try h.newDevice()
            var statuses: [Int] = []
            var retryAfter: String?
            for _ in 0..<4 {
                let r = try await h.send("POST", EnforcementHarness.prefix + "/challenge", body: #"{"keyId":"\#(device.keyIdBase64)","purpose":"attest"}"#)
                statuses.append(r.status)
                if r.status == 429 {
                    retryAfter = r.headers["retry-after"]
                    #expect(r.reason == "rate-limited")
                }
            }
            #expect(statuses == [200, 200, 200, 429])
            #expect(Int(retryAfter ?? "") ?? 0 >= 1)
            try await h.stop()
        }

        @Test func upstreamFailuresAndOversizedHeaders() async throws {
            let h = try await EnforcementHarness.start()
            let dead = try await h.send("GET", "/dead/x")
            #expect(dead.status == 502)
            #expect(dead.reason == "upstream-unavailable")
            let slow = try await h.send("GET", "/slow?ms=3000")
            #expect(slow.status == 504)
            #expect(slow.reason == "upstream-timeout")
            // HTTP/1.1: a header block over limits.maxHeaderListBytes (64 KiB) is 431.
            let huge = try await h.send("GET", "/open/x", headers: [("X-Big", String(repeating: "h", count: 70_000))], http1: true)
            #expect(huge.status == 431)
            #expect(huge.reason == "headers-too-large")
            try await h.stop()
        }
    }
}
