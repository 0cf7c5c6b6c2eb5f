import AssertGateCore
import AssertGateTestSupport
import DeviceSim
import Foundation
import NIOHTTP1
import Testing
import Verifier

extension Integration {
    /// protocol.md behaviours the other suites leave out: the App-Version and
    /// Launch-Category trust headers (§6), 405 on the local routes for every
    /// method but POST (§5), 413 on monitor routes (§5) and a monitor route
    /// with `onStoreError: reject` (§5, config.md).
    @Suite(.serialized) struct ProtocolEdgeTests {
        @Test func appVersionAndLaunchCategoryReachTheUpstreamOnlyWhenVerified() async throws {
            let h = try await EnforcementHarness.start()
            let version = "1.2 (45)/β"
            let category: [UInt8] = [0x01, 0x00, 0x00, 0xAB]
            // pct(version) per protocol.md notation, and the category's decimal number (little-endian
            // 0xAB000001 has no name, risk.md §1), written out by hand.
            let expectedVersion = "1.2%20%2845%29%2F%CE%B2"
            let expectedCategory = "2868903937"

            let full = try h.newDevice()
            let attested = try await h.attestCarrying(
                full, extensions: DeviceSim.AuthenticatorExtensions(bundleVersion: version, validationCategory: category),
                userId: "dave")
            #expect(attested.status == 201, "\(attested.body)")
            // What the verifier extracted is in the key record.
            let record = "ag:{\(full.keyIdBase64URL)}:key"
            #expect(try h.redis.run(["HGET", record, "bv"]).string == version)
            #expect(try h.redis.run(["HGET", record, "cat"]).string == expectedCategory)

            // Both protocols, several connections (each lands on either worker:
            // key-cache misses load bv/lc from Redis, hits reuse them).
            var counter: UInt32 = 0
            for http1 in [false, true, false, true] {
                counter += 1
                let path = "/enforce/v?n=\(counter)"
                let spoof = [("X-AssertGate-App-Version", "9.9"), ("x-assertgate-launch-category", "ff")]
                let r = try await h.send(
                    "GET", path, headers: spoof + h.assertionHeaders(full, method: "GET", path: path, counter: counter),
                    http1: http1)
                #expect(r.status == 200, "\(r.body)")
                let head = try #require(h.lastUpstreamHead)
                #expect(head.uri == path)
                #expect(head.headers.first(name: "x-assertgate-trust") == "verified")
                #expect(head.headers["x-assertgate-app-version"] == [expectedVersion], "http1=\(http1)")
                #expect(head.headers["x-assertgate-launch-category"] == [expectedCategory], "http1=\(http1)")
                #expect(head.headers.first(name: "x-assertgate-user") == "dave")
                // Both headers are covered by the trust signature.
                #expect(try await IndependentSignatureCheck.verify(head, secret: EnforcementHarness.signingSecret))
            }

            // Monitor: verified carries them; a failed assertion (replayed counter) carries neither.
            counter += 1
            let ok = try await h.send(
                "GET", "/monitor/v", headers: h.assertionHeaders(full, method: "GET", path: "/monitor/v", counter: counter))
            #expect(ok.status == 200)
            let verifiedHead = try #require(h.lastUpstreamHead)
            #expect(verifiedHead.headers.first(name: "x-assertgate-trust") == "verified")
            #expect(verifiedHead.headers.first(name: "x-assertgate-app-version") == expectedVersion)
            #expect(verifiedHead.headers.first(name: "x-assertgate-launch-category") == expectedCategory)
            let replayed = try await h.send(
                "GET", "/monitor/v",
                headers: [("X-AssertGate-App-Version", "9.9")]
                    + h.assertionHeaders(full, method: "GET", path: "/monitor/v", counter: counter))
            #expect(replayed.status == 200)
            let invalidHead = try #require(h.lastUpstreamHead)
            #expect(invalidHead.headers.first(name: "x-assertgate-trust") == "invalid")
            #expect(invalidHead.headers.first(name: "x-assertgate-reason") == "counter-replay")
            #expect(invalidHead.headers["x-assertgate-app-version"].isEmpty)
            #expect(invalidHead.headers["x-assertgate-launch-category"].isEmpty)

            // Only the bundle version: App-Version alone.
            let versionOnly = try h.newDevice()
            #expect(
                try await h.attestCarrying(versionOnly, extensions: DeviceSim.AuthenticatorExtensions(bundleVersion: "7"))
                    .status == 201)
            #expect(try h.redis.run(["HEXISTS", "ag:{\(versionOnly.keyIdBase64URL)}:key", "cat"]) == .integer(0))
            let v = try await h.send(
                "GET", "/enforce/w", headers: h.assertionHeaders(versionOnly, method: "GET", path: "/enforce/w", counter: 1))
            #expect(v.status == 200, "\(v.body)")
            let vHead = try #require(h.lastUpstreamHead)
            #expect(vHead.headers["x-assertgate-app-version"] == ["7"])
            #expect(vHead.headers["x-assertgate-launch-category"].isEmpty)

            // Only the launch category: Launch-Category alone.
            let categoryOnly = try h.newDevice()
            #expect(
                try await h.attestCarrying(
                    categoryOnly, extensions: DeviceSim.AuthenticatorExtensions(validationCategory: [0x02, 0x00, 0x00, 0x00])
                ).status == 201)
            let c = try await h.send(
                "GET", "/enforce/c", headers: h.assertionHeaders(categoryOnly, method: "GET", path: "/enforce/c", counter: 1))
            #expect(c.status == 200, "\(c.body)")
            let cHead = try #require(h.lastUpstreamHead)
            #expect(cHead.headers["x-assertgate-app-version"].isEmpty)
            #expect(cHead.headers["x-assertgate-launch-category"] == ["testflight"])

            // No extensions at all: neither header, and spoofed ones are gone.
            let plain = try h.newDevice()
            #expect(try await h.attest(plain).status == 201)
            let p = try await h.send(
                "GET", "/enforce/p",
                headers: [("X-AssertGate-App-Version", "9.9"), ("X-AssertGate-Launch-Category", "ff")]
                    + h.assertionHeaders(plain, method: "GET", path: "/enforce/p", counter: 1))
            #expect(p.status == 200, "\(p.body)")
            let pHead = try #require(h.lastUpstreamHead)
            #expect(pHead.headers.first(name: "x-assertgate-trust") == "verified")
            #expect(pHead.headers["x-assertgate-app-version"].isEmpty)
            #expect(pHead.headers["x-assertgate-launch-category"].isEmpty)
            try await h.stop()
        }

        @Test func localRoutesAnswer405ToEveryMethodButPost() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            let before = h.upstreamCount
            for route in ["/challenge", "/attest"] {
                let path = EnforcementHarness.prefix + route
                for http1 in [false, true] {
                    let label = "\(route) http1=\(http1)"
                    // HEAD: no body, but status and headers of the problem answer.
                    let head = try await h.send("HEAD", path, http1: http1)
                    #expect(head.status == 405, "HEAD \(label)")
                    #expect(head.headers["allow"] == "POST", "HEAD \(label)")
                    #expect(head.headers["content-type"] == "application/problem+json", "HEAD \(label)")
                    #expect(head.headers["x-request-id"]?.isEmpty == false, "HEAD \(label)")

                    for (method, target, body) in [
                        ("OPTIONS", path, nil), ("GET", path + "?x=1", nil), ("PUT", path + "?x=1", "{}"),
                        ("DELETE", path, nil),
                    ] as [(String, String, String?)] {
                        let r = try await h.send(method, target, body: body, http1: http1)
                        #expect(r.status == 405, "\(method) \(target) \(label): \(r.body)")
                        #expect(r.reason == "method-not-allowed", "\(method) \(target) \(label)")
                        #expect(r.headers["allow"] == "POST", "\(method) \(target) \(label)")
                        #expect(r.headers["content-type"] == "application/problem+json")
                        #expect(r.json["type"] as? String == "urn:assertgate:problem:method-not-allowed")
                        #expect(r.json["status"] as? Int == 405)
                        #expect(r.json["requestId"] as? String == r.headers["x-request-id"])
                        // A known length: no chunked framing for a few bytes of JSON.
                        #expect(r.headers["content-length"] == String(r.body.utf8.count), "\(method) \(target) \(label)")
                        #expect(r.headers["transfer-encoding"] == nil)
                    }
                }
            }
            // The query string is not part of the match for POST either: a challenge is issued.
            let withQuery = try await h.send(
                "POST", EnforcementHarness.prefix + "/challenge?x=1",
                body: #"{"keyId":"\#(device.keyIdBase64)","purpose":"attest"}"#)
            #expect(withQuery.status == 200, "\(withQuery.body)")
            #expect(ChallengeCodec.isWellFormed(withQuery.json["challenge"] as? String ?? ""))
            // Everything above was answered by the gateway itself.
            #expect(h.upstreamCount == before)
            try await h.stop()
        }

        @Test func monitorRoutesRefuseBodiesOverTheirLimitWithoutForwarding() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)

            // Exactly the limit (1 KiB) is checked and forwarded.
            let atLimit = String(repeating: "a", count: 1024)
            let fits = try await h.send(
                "POST", "/monitor-capped/x",
                headers: h.assertionHeaders(device, method: "POST", path: "/monitor-capped/x", body: Array(atLimit.utf8), counter: 1),
                body: atLimit)
            #expect(fits.status == 200, "\(fits.body)")
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "verified")
            #expect(h.lastUpstreamHead?.headers.first(name: "content-length") == "1024")
            let before = h.upstreamCount

            // One byte more with assertion headers: 413 from the gateway, over both
            // protocols and with a chunked HTTP/1.1 body (no Content-Length).
            let over = String(repeating: "b", count: 1025)
            let signed = try h.assertionHeaders(
                device, method: "POST", path: "/monitor-capped/x", body: Array(over.utf8), counter: 2)
            let cases: [(String, [(String, String)], Bool)] = [
                ("signed h2", signed, false),
                ("signed h1", signed, true),
                ("chunked h1", signed + [("Transfer-Encoding", "chunked")], true),
            ]
            for (label, headers, http1) in cases {
                let r = try await h.send("POST", "/monitor-capped/x", headers: headers, body: over, http1: http1)
                #expect(r.status == 413, "\(label): \(r.body)")
                #expect(r.reason == "body-too-large", "\(label)")
                #expect(r.headers["content-type"] == "application/problem+json", "\(label)")
                #expect(r.json["requestId"] as? String == r.headers["x-request-id"], "\(label)")
                #expect(h.upstreamCount == before, "\(label) reached the upstream")
            }

            // Without assertion headers there is nothing to verify and nothing is
            // buffered: the body streams upstream, marked missing, whatever its size.
            let unsigned = try await h.send("POST", "/monitor-capped/x", body: over)
            #expect(unsigned.status == 200, "\(unsigned.body)")
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "missing")
            let big = String(repeating: "c", count: (1 << 20) + 1)
            let bigUnsigned = try await h.send("POST", "/monitor/big", body: big)
            #expect(bigUnsigned.status == 200, "\(bigUnsigned.body)")
            #expect(h.lastUpstreamHead?.headers.first(name: "content-length") == String((1 << 20) + 1))
            #expect(h.upstreamCount == before + 2)

            // Refused before any store work: counter 2 was not spent by the refused requests.
            let small = #"{"n":2}"#
            let after = try await h.send(
                "POST", "/monitor-capped/x",
                headers: h.assertionHeaders(device, method: "POST", path: "/monitor-capped/x", body: Array(small.utf8), counter: 2),
                body: small)
            #expect(after.status == 200)
            #expect(h.upstreamCount == before + 3)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "verified")
            try await h.stop()
        }

        /// protocol.md §4 step 1 needs only the head: an enforce route answers a
        /// request without (or with malformed) assertion headers at once, without
        /// waiting for, or buffering, a body that could never verify.
        /// An HTTP/1.1 target in absolute form reaches the upstream in origin
        /// form, and that is the form its assertion signs (as HTTP/2's
        /// `:path` is): signed over the absolute form it is `bad-signature`.
        @Test func anAbsoluteFormTargetIsSignedInItsOriginForm() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let absolute = "http://api.example.test/enforce/abs?x=1"
            let origin = try await h.send(
                "GET", "/enforce/abs?x=1", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/abs?x=1", counter: 1),
                http1: true, requestTarget: absolute)
            #expect(origin.status == 200, "\(origin.body)")
            #expect(h.lastUpstreamHead?.uri == "/enforce/abs?x=1")
            #expect(h.lastUpstreamHead?.headers.first(name: "host") == "api.example.test")
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "verified")
            let asSent = try await h.send(
                "GET", "/enforce/abs?x=1", headers: h.assertionHeaders(device, method: "GET", path: absolute, counter: 2),
                http1: true, requestTarget: absolute)
            #expect(asSent.status == 403)
            #expect(asSent.reason == "bad-signature")
            try await h.stop()
        }

        @Test func enforceRoutesAnswerMissingOrMalformedHeadersFromTheHead() async throws {
            let h = try await EnforcementHarness.start()
            let port = String(h.server.ports[0])
            let missing1 = try await HardeningTests.run(["h1-head-only", port, "/enforce/x", "1000"])
            #expect(missing1["status"] as? Int == 401, "\(missing1)")
            #expect((missing1["body"] as? String)?.contains("missing-assertion") == true)
            let missing2 = try await HardeningTests.run(["h2-head-only", port, "/enforce/x"])
            #expect(missing2["status"] as? Int == 401, "\(missing2)")
            let malformed = try await HardeningTests.run([
                "h1-head-only", port, "/enforce/x", "1000", "nohold",
                "AssertGate-Key-Id: not-a-key\\r\\nAssertGate-Assertion: AAAA\\r\\n",
            ])
            #expect(malformed["status"] as? Int == 400, "\(malformed)")
            #expect((malformed["body"] as? String)?.contains("malformed-header") == true)
            let malformed2 = try await HardeningTests.run([
                "h2-head-only", port, "/enforce/x", #"[["assertgate-key-id", "not-a-key"], ["assertgate-assertion", "AAAA"]]"#,
            ])
            #expect(malformed2["status"] as? Int == 400, "\(malformed2)")
            #expect(h.upstreamCount == 0)
            try await h.stop()
        }

        @Test func monitorRouteWithOnStoreErrorRejectAnswers503WhileTheDefaultForwards() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device, userId: "erin").status == 201)
            // The route is a monitor route like any other while Redis is up.
            let up = try await h.send(
                "GET", "/monitor-strict/a", headers: h.assertionHeaders(device, method: "GET", path: "/monitor-strict/a", counter: 1))
            #expect(up.status == 200)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "verified")
            let missing = try await h.send("GET", "/monitor-strict/a")
            #expect(missing.status == 200)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "missing")

            h.redis.stop()
            let before = h.upstreamCount
            // Several connections, both protocols: a worker with the key cached
            // fails at the commit, one without it at the key load.
            var counter: UInt32 = 1
            for http1 in [false, true, false, true] {
                counter += 1
                let path = "/monitor-strict/b"
                let r = try await h.send(
                    "GET", path, headers: h.assertionHeaders(device, method: "GET", path: path, counter: counter), http1: http1)
                #expect(r.status == 503, "http1=\(http1): \(r.body)")
                #expect(r.reason == "store-unavailable")
                #expect(r.headers["content-type"] == "application/problem+json")
                #expect(h.upstreamCount == before, "forwarded while the store is down")
            }

            // The default monitor route forwards, trust unavailable, no identity.
            counter += 1
            let lenient = try await h.send(
                "GET", "/monitor/b", headers: h.assertionHeaders(device, method: "GET", path: "/monitor/b", counter: counter))
            #expect(lenient.status == 200, "\(lenient.body)")
            #expect(h.upstreamCount == before + 1)
            let head = try #require(h.lastUpstreamHead)
            #expect(head.uri == "/monitor/b")
            #expect(head.headers.first(name: "x-assertgate-trust") == "unavailable")
            #expect(head.headers.first(name: "x-assertgate-reason") == "store-unavailable")
            #expect(head.headers["x-assertgate-key-id"].isEmpty && head.headers["x-assertgate-user"].isEmpty)
            #expect(try await IndependentSignatureCheck.verify(head, secret: EnforcementHarness.signingSecret))
            try await h.stop()
        }
    }
}

extension EnforcementHarness {
    /// The attest call of protocol.md §3 for an attestation whose authData
    /// carries the iOS 27 extension map (DeviceSim `AttestationOptions.extensions`).
    fileprivate func attestCarrying(
        _ device: SimDevice, extensions: DeviceSim.AuthenticatorExtensions, userId: String? = nil
    ) async throws -> Response {
        let ch = try await challenge(for: device, purpose: "attest")
        let clientDataHash = DeviceSim.ClientData.hash(DeviceSim.ClientData.attestation(challenge: ch, userId: userId))
        let object = try device.attest(
            clientDataHash: clientDataHash, appId: Self.appId, environment: .development,
            at: Int64(Date().timeIntervalSince1970), options: AttestationOptions(extensions: extensions))
        var fields = [
            #""keyId":"\#(device.keyIdBase64)""#, #""challenge":"\#(ch)""#,
            #""attestation":"\#(Verifier.Base64.encode(object))""#,
        ]
        if let userId { fields.append(#""userId":\#(JSONText.quoted(userId))"#) }
        return try await send("POST", Self.prefix + "/attest", body: "{" + fields.joined(separator: ",") + "}")
    }
}
