import AppleMock
import AssertGateTestSupport
@testable import AssertGateCore
import DeviceSim
import Foundation
import Testing
import Verifier

extension Integration {
    /// Receipt refresh end to end (app-attest.md §4): a gateway with
    /// `fraudMetric` pointing at a fake Apple data endpoint over HTTPS, real
    /// Redis, DeviceSim attestations whose receipts the fake endpoint reads
    /// and answers with RECEIPT receipts carrying a risk metric.
    @Suite(.serialized) struct ReceiptRefreshTests {
        /// Polls `condition` (an external process answers in its own time) until a deadline.
        private func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
            let deadline = Date().addingTimeInterval(15)
            while try await !condition() {
                guard Date() < deadline else { throw HarnessError("not within 15 s: \(what)") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        private func scheduled(_ h: EnforcementHarness, _ device: SimDevice) throws -> Int64? {
            let bucket = Int(device.keyId[0]) % 8
            return try h.redis.run(["ZSCORE", "ag:rr:\(bucket)", device.keyIdBase64URL]).string.flatMap { Int64($0) }
        }

        private func metric(_ h: EnforcementHarness, _ result: String) async throws -> Int {
            let body = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            let prefix = "assertgate_receipt_refreshes_total{result=\"\(result)\"} "
            for line in body.split(separator: "\n") where line.hasPrefix(prefix) {
                return Int(line.dropFirst(prefix.count)) ?? -1
            }
            return 0
        }

        @Test func aRefreshedRiskMetricReachesTheUpstreamAndTheRoutePolicy() async throws {
            let h = try await EnforcementHarness.start(.init(receiptRefresh: true))
            let apple = try #require(h.apple)
            apple.script([.receipt(riskMetric: 7, notBeforeInSeconds: 86_400)], for: .attestationData)
            let device = try h.newDevice()
            let before = Int64(Date().timeIntervalSince1970)
            #expect(try await h.attest(device).status == 201)

            // The attestation's receipt (no not-before) is refreshed at once.
            // The refresher stores the receipt, then reschedules, then counts: wait
            // for the count, the last of the three, before reading the other two.
            let key = "ag:{\(device.keyIdBase64URL)}:key"
            try await eventually("the refresh is counted") { try await metric(h, "refreshed") == 1 }
            #expect(try h.redis.run(["HGET", key, "risk"]).string == "7")
            #expect(apple.requests.count == 1)
            let request = try #require(apple.requests.first)
            #expect(request.method == "POST" && request.path == "/v1/attestationData")
            // The body is the stored receipt, and the new one replaced it.
            let sent = try Base64.decode(try #require(String(bytes: request.body, encoding: .utf8)))
            guard case .bulk(let stored) = try h.redis.run(["HGET", key, "rcpt"]) else {
                Issue.record("no receipt stored")
                return
            }
            #expect(sent != stored)
            let refreshed = try ReceiptVerifier.verify(receipt: stored, anchors: TrustAnchors(pemFiles: [h.caDirectory + "/receipt-root.cert.pem"]))
            #expect(refreshed.kind == .receipt && refreshed.riskMetric == 7)
            // Next refresh: not before the new receipt's not-before time (a day), nor refreshEvery (1 h).
            let next = try #require(try scheduled(h, device))
            #expect(next >= before + 86_400 && next <= Int64(Date().timeIntervalSince1970) + 86_400 + 5)

            // The token: ES256 by the DeviceCheck key, kid and iss from the config.
            try await IndependentJWTCheck.verify(
                try #require(request.authorization), publicKeyOf: h.deviceCheckKeyPath,
                kid: EnforcementHarness.deviceCheckKeyId, iss: EnforcementHarness.teamId)

            // What the upstream sees, and a route whose maximum is 5.
            let ok = try await h.send("GET", "/enforce/a", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: 1))
            #expect(ok.status == 200, "\(ok.body)")
            let risk = try #require(h.lastUpstreamHead?.headers.first(name: "x-assertgate-risk-metric"))
            #expect(risk.hasPrefix("7; age="))
            let risky = try await h.send("GET", "/risky/a", headers: h.assertionHeaders(device, method: "GET", path: "/risky/a", counter: 2))
            #expect(risky.status == 403)
            #expect(risky.reason == "risk-too-high")
            try await h.stop()
        }

        /// The refresher checks receipts with the running configuration's
        /// anchors and clock skew: a reload reaches it.
        @Test func theRefresherFollowsAReloadsReceiptSettings() async throws {
            let h = try await EnforcementHarness.start(.init(receiptRefresh: true))
            let refresher = try #require(h.server.refresher)
            #expect(refresher.clockSkewInUse == 60)
            try await h.reload { $0.replacingOccurrences(of: "  receiptTrustAnchors:", with: "  clockSkew: 5m\n  receiptTrustAnchors:") }
            #expect(refresher.clockSkewInUse == 300)
            try await h.stop()
        }

        @Test func everyAnswerOfAppleEndsWhereItShould() async throws {
            let h = try await EnforcementHarness.start(.init(receiptRefresh: true))
            let apple = try #require(h.apple)
            func attestAndWait(_ answer: AppleMockAnswer, result: String) async throws -> SimDevice {
                apple.script([answer], for: .attestationData)
                let seen = apple.requests.count
                let counted = try await metric(h, result)
                let device = try h.newDevice()
                #expect(try await h.attest(device).status == 201)
                try await eventually("\(result) counted") { try await metric(h, result) == counted + 1 }
                #expect(apple.requests.count == seen + 1)
                return device
            }
            let now = { Int64(Date().timeIntervalSince1970) }

            // 304: too early; tried again later, nothing stored.
            let early = try await attestAndWait(.status(304, ""), result: "too-early")
            #expect(try scheduled(h, early).map { $0 >= now() + 3500 } == true)
            #expect(try h.redis.run(["HGET", "ag:{\(early.keyIdBase64URL)}:key", "risk"]).isNull)

            // 404 (no data left at Apple) and 400 (wrong environment): off the schedule.
            let gone = try await attestAndWait(.status(404, ""), result: "no-data")
            #expect(try scheduled(h, gone) == nil)
            let wrong = try await attestAndWait(.status(400, ""), result: "rejected")
            #expect(try scheduled(h, wrong) == nil)

            // 500: retried later.
            let failing = try await attestAndWait(.status(500, ""), result: "failed")
            #expect(try scheduled(h, failing).map { $0 >= now() + 800 } == true)

            // A receipt signed by someone else: not stored, tried again a refresh period later.
            let forged = try await attestAndWait(.untrustedReceipt, result: "invalid-receipt")
            #expect(try h.redis.run(["HGET", "ag:{\(forged.keyIdBase64URL)}:key", "risk"]).isNull)
            #expect(try scheduled(h, forged).map { $0 >= now() + 3500 } == true)

            // 401: every refresh pauses; the key waits for the pause.
            let refused = try await attestAndWait(.status(401, ""), result: "unauthorized")
            #expect(try scheduled(h, refused).map { $0 >= now() + 500 } == true)
            try await h.stop()
        }

        @Test func refreshesShareOneKeptConnection() async throws {
            // Three keys refreshed one after the other: one TLS connection.
            let h = try await EnforcementHarness.start(.init(receiptRefresh: true))
            let apple = try #require(h.apple)
            for n in 1...3 {
                #expect(try await h.attest(try h.newDevice()).status == 201)
                try await eventually("refresh \(n)") { try await metric(h, "refreshed") == n }
            }
            #expect(apple.requests.count == 3)
            #expect(apple.connections == 1)
            try await h.stop()
        }

        @Test func aKeptConnectionClosedByAppleIsReplacedWithoutAFailure() async throws {
            // Apple closes each kept connection at its second request, without
            // an answer: that request goes again on a new connection.
            let h = try await EnforcementHarness.start(.init(receiptRefresh: true, appleDropsKeptConnections: true))
            let apple = try #require(h.apple)
            for n in 1...3 {
                #expect(try await h.attest(try h.newDevice()).status == 201)
                try await eventually("refresh \(n)") { try await metric(h, "refreshed") == n }
            }
            #expect(try await metric(h, "failed") == 0)
            #expect(apple.requests.count == 3)
            #expect(apple.connections == 3)
            try await h.stop()
        }

        @Test func aRevokedKeyIsNotRefreshed() async throws {
            let h = try await EnforcementHarness.start(.init(receiptRefresh: true))
            let apple = try #require(h.apple)
            // Hold the first refresh back: schedule it far ahead, revoke, then make it due.
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            try await eventually("first refresh") { try await metric(h, "refreshed") == 1 }
            let revoked = try await h.send(
                "POST", "/keys/\(device.keyIdBase64URL)/revoke",
                headers: [("Authorization", "Bearer \(EnforcementHarness.adminToken)")], http1: true, base: h.adminBase)
            #expect(revoked.status == 200, "\(revoked.body)")
            let bucket = Int(device.keyId[0]) % 8
            try h.redis.run(["ZADD", "ag:rr:\(bucket)", "0", device.keyIdBase64URL])
            try await eventually("dropped") { try await metric(h, "dropped") == 1 }
            #expect(try scheduled(h, device) == nil)
            #expect(apple.requests.count == 1)
            try await h.stop()
        }
    }
}

/// The DeviceCheck token checked with the `openssl` CLI (not our code): the
/// JWS signature r‖s is turned into DER and verified with the key's public half.
enum IndependentJWTCheck {
    static func verify(_ token: String, publicKeyOf keyPath: String, kid: String, iss: String) async throws {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        let header = try JSONSerialization.jsonObject(with: Data(try Base64.decode(parts[0]))) as? [String: Any]
        let claims = try JSONSerialization.jsonObject(with: Data(try Base64.decode(parts[1]))) as? [String: Any]
        #expect(header?["alg"] as? String == "ES256")
        #expect(header?["kid"] as? String == kid)
        #expect(claims?["iss"] as? String == iss)
        let iat = try #require(claims?["iat"] as? Int)
        #expect(abs(iat - Int(Date().timeIntervalSince1970)) < 120)
        let raw = try Base64.decode(parts[2])
        try #require(raw.count == 64)
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var b = Array(bytes.drop { $0 == 0 })
            if b.isEmpty { b = [0] }
            if b[0] & 0x80 != 0 { b.insert(0, at: 0) }
            return [0x02, UInt8(b.count)] + b
        }
        let seq = integer(raw[0..<32]) + integer(raw[32..<64])
        let der = [0x30, UInt8(seq.count)] + seq
        let dir = NSTemporaryDirectory() + "assertgate-jwt-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data(der).write(to: URL(fileURLWithPath: dir + "/sig.der"))
        try Data((parts[0] + "." + parts[1]).utf8).write(to: URL(fileURLWithPath: dir + "/input"))
        let pub = try await Run.tool("openssl", ["pkey", "-in", keyPath, "-pubout", "-out", dir + "/pub.pem"])
        try #require(pub.status == 0, "\(pub.stderr)")
        let check = try await Run.tool(
            "openssl", ["dgst", "-sha256", "-verify", dir + "/pub.pem", "-signature", dir + "/sig.der", dir + "/input"])
        #expect(check.status == 0 && check.stdout.contains("Verified OK"), "\(check.stdout) \(check.stderr)")
    }
}
