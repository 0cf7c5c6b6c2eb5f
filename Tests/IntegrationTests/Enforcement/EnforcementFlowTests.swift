import AssertGateCore
import AssertGateRedis
import DeviceSim
import Foundation
import NIOHTTP1
import Testing
import Verifier

extension Integration {
    /// protocol.md end to end: real Redis, the YAML-configured server, a
    /// recording upstream, curl over HTTP/2 and HTTP/1.1, DeviceSim as the app.
    @Suite(.serialized) struct EnforcementFlowTests {
        @Test func attestThenAssertedRequestsThenReplay() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()

            let attested = try await h.attest(device, userId: "alice é")
            #expect(attested.status == 201, "\(attested.body)")
            #expect(attested.json["keyId"] as? String == device.keyIdBase64URL)
            #expect(attested.json["environment"] as? String == "development")
            #expect(attested.json["trust"] as? String == "attested")
            #expect(attested.json["appId"] as? String == EnforcementHarness.appId)

            // HTTP/2, query string part of the signed path.
            let path = "/enforce/items?q=1&x=%20"
            let ok = try await h.send("GET", path, headers: h.assertionHeaders(device, method: "GET", path: path, counter: 1))
            #expect(ok.status == 200, "\(ok.body)")
            #expect(ok.headers["x-request-id"] != nil)
            let head = try #require(h.lastUpstreamHead)
            #expect(head.uri == path)
            #expect(head.headers.first(name: "x-assertgate-trust") == "verified")
            #expect(head.headers.first(name: "x-assertgate-key-id") == device.keyIdBase64URL)
            #expect(head.headers.first(name: "x-assertgate-env") == "development")
            #expect(head.headers.first(name: "x-assertgate-user") == "alice%20%C3%A9")
            #expect(head.headers.first(name: "x-assertgate-user-keys") == "1")
            #expect(head.headers["x-assertgate-reason"].isEmpty)
            // Assertion headers are not forwarded by default.
            #expect(head.headers["assertgate-assertion"].isEmpty && head.headers["assertgate-key-id"].isEmpty)
            #expect(try await IndependentSignatureCheck.verify(head, secret: EnforcementHarness.signingSecret))

            // HTTP/1.1 with a bound body.
            let body = #"{"amount":5}"#
            let post = try await h.send(
                "POST", "/enforce/pay", headers: h.assertionHeaders(device, method: "POST", path: "/enforce/pay", body: Array(body.utf8), counter: 2),
                body: body, http1: true)
            #expect(post.status == 200, "\(post.body)")
            #expect(try await IndependentSignatureCheck.verify(try #require(h.lastUpstreamHead), secret: EnforcementHarness.signingSecret))
            let seen = h.upstreamCount

            // The same assertion again, and a lower counter: replays, never forwarded.
            let replayHeaders = try h.assertionHeaders(device, method: "POST", path: "/enforce/pay", body: Array(body.utf8), counter: 2)
            let replay = try await h.send("POST", "/enforce/pay", headers: replayHeaders, body: body)
            #expect(replay.status == 403)
            #expect(replay.reason == "counter-replay")
            #expect(replay.headers["content-type"] == "application/problem+json")
            #expect(replay.json["type"] as? String == "urn:assertgate:problem:counter-replay")
            #expect(replay.json["requestId"] as? String == replay.headers["x-request-id"])
            let lower = try await h.send("GET", "/enforce/x", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/x", counter: 1))
            #expect(lower.reason == "counter-replay")
            #expect(h.upstreamCount == seen)

            // The admin record shows the committed counter.
            let record = try await h.send(
                "GET", "/keys/\(device.keyIdBase64URL)", headers: [("Authorization", "Bearer \(EnforcementHarness.adminToken)")],
                http1: true, base: h.adminBase)
            #expect(record.status == 200)
            #expect(record.json["counter"] as? Int == 2)
            #expect(record.json["userId"] as? String == "alice é")
            try await h.stop()
        }

        @Test func theFlowWorksWithRedisBehindTLS() async throws {
            // rediss:// with a client certificate: attestation, challenge,
            // commit and replay refusal all go through the TLS connections.
            let h = try await EnforcementHarness.start(.init(redisTLS: true))
            let device = try h.newDevice()
            let attested = try await h.attest(device, userId: "bob")
            #expect(attested.status == 201, "\(attested.body)")
            let headers = try h.assertionHeaders(device, method: "GET", path: "/challenged/x", counter: 1,
                challenge: try await h.challenge(for: device, purpose: "assert"))
            let ok = try await h.send("GET", "/challenged/x", headers: headers)
            #expect(ok.status == 200, "\(ok.body)")
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "verified")
            let replay = try await h.send("GET", "/challenged/x", headers: headers)
            #expect(replay.status == 403)
            #expect(replay.reason == "unknown-challenge")
            // What the gateway wrote is in the TLS Redis (read over its plain port).
            #expect(try h.redis.run(["HGET", "ag:{\(device.keyIdBase64URL)}:key", "cnt"]).string == "1")
            try await h.stop()
        }

        @Test func theFlowWorksOnARedisCluster() async throws {
            // Three masters: each key's record and challenges live on the
            // master of its {keyId} slot, the user's set on another. Two keys
            // of one user, on different masters, both report two keys.
            let h = try await EnforcementHarness.start(.init(redisCluster: true))
            let cluster = try #require(h.cluster)
            let first = try h.newDevice()
            var second = try h.newDevice()
            func owner(_ d: SimDevice) throws -> Int {
                try cluster.owner(ofSlot: Int(RedisHashSlot.slot(ofTag: d.keyIdBase64URL)))
            }
            while try owner(second) == owner(first) { second = try h.newDevice() }
            #expect(try await h.attest(first, userId: "carol").status == 201)
            #expect(try await h.attest(second, userId: "carol").status == 201)
            for (device, counter) in [(first, UInt32(1)), (second, 1), (first, 2)] {
                let headers = try h.assertionHeaders(device, method: "GET", path: "/challenged/x", counter: counter,
                    challenge: try await h.challenge(for: device, purpose: "assert"))
                let ok = try await h.send("GET", "/challenged/x", headers: headers)
                #expect(ok.status == 200, "\(ok.body)")
                let head = try #require(h.lastUpstreamHead)
                #expect(head.headers.first(name: "x-assertgate-trust") == "verified")
                #expect(head.headers.first(name: "x-assertgate-user-keys") == "2")
                let replay = try await h.send("GET", "/challenged/x", headers: headers)
                #expect(replay.status == 403)
            }
            // Each record is on its slot's master, which counted the commits.
            let record = "ag:{\(first.keyIdBase64URL)}:key"
            #expect(try cluster.nodes[owner(first)].run(["HGET", record, "cnt"]).string == "2")
            try await h.stop()
        }

        @Test func unsignedPayloadAndChallengeRoutes() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)

            let body = String(repeating: "u", count: 5000)
            let unsigned = try await h.send(
                "PUT", "/unsigned/blob",
                headers: h.assertionHeaders(device, method: "PUT", path: "/unsigned/blob", counter: 1, unsigned: true), body: body)
            #expect(unsigned.status == 200, "\(unsigned.body)")

            let ch = try await h.challenge(for: device, purpose: "assert")
            let withChallenge = try await h.send(
                "GET", "/challenged/a", headers: h.assertionHeaders(device, method: "GET", path: "/challenged/a", counter: 2, challenge: ch))
            #expect(withChallenge.status == 200, "\(withChallenge.body)")
            // Spent: the same challenge with a fresh counter is refused.
            let again = try await h.send(
                "GET", "/challenged/a", headers: h.assertionHeaders(device, method: "GET", path: "/challenged/a", counter: 3, challenge: ch))
            #expect(again.reason == "unknown-challenge")
            #expect(again.status == 403)

            // A challenge issued for another key, and one of purpose attest, are unknown to this request.
            let other = try h.newDevice()
            let foreign = try await h.challenge(for: other, purpose: "assert")
            let cross = try await h.send(
                "GET", "/challenged/a", headers: h.assertionHeaders(device, method: "GET", path: "/challenged/a", counter: 4, challenge: foreign))
            #expect(cross.reason == "unknown-challenge")
            let attestPurpose = try await h.challenge(for: device, purpose: "attest")
            let wrongPurpose = try await h.send(
                "GET", "/challenged/a", headers: h.assertionHeaders(device, method: "GET", path: "/challenged/a", counter: 5, challenge: attestPurpose))
            #expect(wrongPurpose.reason == "unknown-challenge")
            // The foreign challenge was not consumed by the failed attempt: its own key can still spend it.
            #expect(try await h.attest(other).status == 201)
            let owner = try await h.send(
                "GET", "/challenged/a", headers: h.assertionHeaders(other, method: "GET", path: "/challenged/a", counter: 1, challenge: foreign))
            #expect(owner.status == 200, "\(owner.body)")
            try await h.stop()
        }

        @Test func pathsAnUpstreamCouldReadAsAnEnforcedRouteAreEnforced() async throws {
            let h = try await EnforcementHarness.start()
            let before = h.upstreamCount
            // Raw, these select the passthrough route /open/; read as nginx, Tomcat or
            // Express would, they are under the enforced /enforce/: the stricter route decides.
            for path in ["/open/../enforce/pay", "/open/%2e%2e/enforce/pay", "/open/..%2Fenforce/pay", "/open;x/../enforce/pay", "/ENFORCE/pay"] {
                for http1 in [false, true] {
                    let r = try await h.send("POST", path, body: "{}", http1: http1)
                    #expect(r.status == 401, "\(path) http1=\(http1): \(r.status)")
                    #expect(r.reason == "missing-assertion", "\(path)")
                }
            }
            // Two enforced routes with their own settings: which one applies cannot be told.
            let ambiguous = try await h.send("POST", "/enforce/../challenged/x", body: "{}")
            #expect(ambiguous.status == 400)
            #expect(ambiguous.reason == "malformed-request")
            #expect(h.upstreamCount == before)
            // Readings that agree keep their route: passthrough stays open,
            // an escaped slash under /enforce/ is still enforced.
            let open = try await h.send("GET", "/open//x/./y")
            #expect(open.status == 200)
            #expect(h.lastUpstreamHead?.uri == "/open//x/./y")
            let enforced = try await h.send("GET", "/enforce/items/a%2Fb")
            #expect(enforced.status == 401)
            #expect(enforced.reason == "missing-assertion")
            try await h.stop()
        }

        @Test func spoofedTrustHeadersAreRemovedInEveryMode() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let spoofed = [
                ("X-AssertGate-Trust", "verified"), ("x-assertgate-user", "mallory"), ("X-ASSERTGATE-KEY-ID", "forged"),
                ("X-AssertGate-Signature", "t=1, v1=00"), ("x-AssertGate-Anything", "1"),
            ]
            let cases: [(String, [(String, String)], String)] = [
                ("/enforce/s", try h.assertionHeaders(device, method: "GET", path: "/enforce/s", counter: 1), "verified"),
                ("/monitor/s", [], "missing"),
                ("/open/s", [], "none"),
            ]
            for (path, assertion, trust) in cases {
                for http1 in [false, true] {
                    let signed = path == "/enforce/s" && http1
                        ? try h.assertionHeaders(device, method: "GET", path: path, counter: 2) : assertion
                    let r = try await h.send("GET", path, headers: spoofed + signed, http1: http1)
                    #expect(r.status == 200, "\(path) \(r.body)")
                    let head = try #require(h.lastUpstreamHead)
                    #expect(head.headers["x-assertgate-trust"] == [trust], "\(path)")
                    #expect(!head.headers["x-assertgate-user"].contains("mallory"))
                    #expect(!head.headers["x-assertgate-key-id"].contains("forged"))
                    #expect(head.headers["x-assertgate-anything"].isEmpty)
                    #expect(head.headers["x-assertgate-signature"].count == 1)
                    #expect(try await IndependentSignatureCheck.verify(head, secret: EnforcementHarness.signingSecret))
                }
            }
            try await h.stop()
        }

        @Test func assertionReasonsInEnforceAreAnsweredAndNeverForwarded() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let stranger = try h.newDevice()
            let before = h.upstreamCount
            var counter: UInt32 = 10

            func check(_ path: String, _ headers: [(String, String)], _ reason: String, _ status: Int, body: String? = nil) async throws {
                let r = try await h.send(body == nil ? "GET" : "POST", path, headers: headers, body: body)
                #expect(r.status == status, "\(reason): \(r.body)")
                #expect(r.reason == reason, "\(r.body)")
                #expect(r.headers["content-type"] == "application/problem+json")
            }
            func next() -> UInt32 {
                counter += 1
                return counter
            }
            try await check("/enforce/a", [], "missing-assertion", 401)
            try await check("/challenged/a", h.assertionHeaders(device, method: "GET", path: "/challenged/a", counter: next()), "missing-challenge", 401)
            try await check("/enforce/a", [("AssertGate-Key-Id", "abc"), ("AssertGate-Assertion", "oA==")], "malformed-header", 400)
            try await check(
                "/challenged/a",
                h.assertionHeaders(device, method: "GET", path: "/challenged/a", counter: next()) + [("AssertGate-Challenge", "short")],
                "malformed-header", 400)
            try await check("/enforce/a", [("AssertGate-Key-Id", device.keyIdBase64), ("AssertGate-Assertion", "oA==")], "malformed-assertion", 400)
            for mutation in [AssertionMutation.malformedCBOR, .signatureNotDER] {
                try await check("/enforce/a", h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: next(), mutation: mutation), "malformed-assertion", 400)
            }
            try await check("/enforce/a", h.assertionHeaders(stranger, method: "GET", path: "/enforce/a", counter: 1), "unknown-key", 401)
            // Signed for another path, and the DeviceSim bad-signature mutation.
            try await check("/enforce/a", h.assertionHeaders(device, method: "GET", path: "/enforce/b", counter: next()), "bad-signature", 403)
            try await check("/enforce/a", h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: next(), mutation: .badSignature), "bad-signature", 403)
            try await check("/enforce/a", h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: next(), mutation: .wrongAppId), "app-id-mismatch", 403)
            try await check(
                "/challenged/a",
                h.assertionHeaders(device, method: "GET", path: "/challenged/a", counter: next(), challenge: Verifier.Base64.encodeURL([UInt8](repeating: 1, count: 32))),
                "unknown-challenge", 403)
            // A body over the route's maxBodyBytes (1 KiB).
            let big = String(repeating: "b", count: 2048)
            try await check("/enforce/a", h.assertionHeaders(device, method: "POST", path: "/enforce/a", body: Array(big.utf8), counter: next()), "body-too-large", 413, body: big)
            // Bad signatures burnt nothing: the next counter still works.
            let fine = try await h.send("GET", "/enforce/a", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: 11))
            #expect(fine.status == 200, "\(fine.body)")
            #expect(h.upstreamCount == before + 1)

            // Risk metric: above the route's maximum (5) is refused there and shown elsewhere.
            let key = "ag:{\(device.keyIdBase64URL)}:key"
            try h.redis.run(["HSET", key, "risk", "9", "risk_at", String(Int(Date().timeIntervalSince1970) - 30)])
            try await check("/risky/a", h.assertionHeaders(device, method: "GET", path: "/risky/a", counter: next()), "risk-too-high", 403)
            let shown = try await h.send("GET", "/enforce/r", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/r", counter: next()))
            #expect(shown.status == 200)
            let risk = try #require(h.lastUpstreamHead?.headers.first(name: "x-assertgate-risk-metric"))
            #expect(risk.hasPrefix("9; age="))

            // Revoked through the admin API: refused from then on.
            let revoke = try await h.send(
                "POST", "/keys/\(device.keyIdBase64URL)/revoke",
                headers: [("Authorization", "Bearer \(EnforcementHarness.adminToken)")], http1: true, base: h.adminBase)
            #expect(revoke.status == 200)
            #expect(revoke.json["revoked"] as? Bool == true)
            try await check("/enforce/a", h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: next()), "revoked-key", 403)
            try await h.stop()
        }

        @Test func monitorForwardsEveryFailureWithItsReason() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device, userId: "bob").status == 201)
            let stranger = try h.newDevice()
            #expect(try await h.send("GET", "/monitor/v", headers: h.assertionHeaders(device, method: "GET", path: "/monitor/v", counter: 5)).status == 200)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "verified")

            let cases: [(String, [(String, String)], String, String)] = [
                ("/monitor/a", [], "missing", "missing-assertion"),
                ("/monitor-challenged/a", try h.assertionHeaders(device, method: "GET", path: "/monitor-challenged/a", counter: 6), "invalid", "missing-challenge"),
                ("/monitor/a", [("AssertGate-Key-Id", "abc"), ("AssertGate-Assertion", "oA==")], "invalid", "malformed-header"),
                ("/monitor/a", [("AssertGate-Key-Id", device.keyIdBase64), ("AssertGate-Assertion", "oA==")], "invalid", "malformed-assertion"),
                ("/monitor/a", try h.assertionHeaders(stranger, method: "GET", path: "/monitor/a", counter: 1), "invalid", "unknown-key"),
                ("/monitor/a", try h.assertionHeaders(device, method: "GET", path: "/monitor/other", counter: 7), "invalid", "bad-signature"),
                ("/monitor/a", try h.assertionHeaders(device, method: "GET", path: "/monitor/a", counter: 8, mutation: .wrongAppId), "invalid", "app-id-mismatch"),
                ("/monitor-challenged/a", try h.assertionHeaders(device, method: "GET", path: "/monitor-challenged/a", counter: 9, challenge: Verifier.Base64.encodeURL([UInt8](repeating: 2, count: 32))), "invalid", "unknown-challenge"),
                ("/monitor/a", try h.assertionHeaders(device, method: "GET", path: "/monitor/a", counter: 5), "invalid", "counter-replay"),
            ]
            for (path, headers, trust, reason) in cases {
                let r = try await h.send("GET", path, headers: headers)
                #expect(r.status == 200, "\(reason): \(r.body)")
                let head = try #require(h.lastUpstreamHead)
                #expect(head.uri == path)
                #expect(head.headers.first(name: "x-assertgate-trust") == trust, "\(reason)")
                #expect(head.headers.first(name: "x-assertgate-reason") == reason)
                // No identity for a request that did not verify.
                #expect(head.headers["x-assertgate-user"].isEmpty && head.headers["x-assertgate-key-id"].isEmpty)
                #expect(try await IndependentSignatureCheck.verify(head, secret: EnforcementHarness.signingSecret))
            }
            try h.redis.run(["HSET", "ag:{\(device.keyIdBase64URL)}:key", "rev", "1"])
            #expect(try await h.send("GET", "/monitor/a", headers: h.assertionHeaders(device, method: "GET", path: "/monitor/a", counter: 20)).status == 200)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-reason") == "revoked-key")
            try await h.stop()
        }
    }
}
