import AppleMock
import AssertGateTestSupport
import AssertGateCore
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// DeviceCheck on routes (risk.md §3): the whole gateway from its YAML file,
/// real Redis for the first-use records, the Apple mock over TLS, the
/// recording upstream, curl as the client.
extension Integration {
    @Suite(.serialized) struct DeviceCheckRouteTests {
        private func harness() async throws -> EnforcementHarness {
            var options = EnforcementHarness.Options()
            options.deviceCheck = true
            return try await EnforcementHarness.start(options)
        }

        private func token(_ device: String) throws -> (String, String) {
            ("AssertGate-Device-Token", try MockDeviceToken.make(device: device))
        }

        /// The headers the upstream saw on its last request.
        private func forwarded(_ h: EnforcementHarness) throws -> HTTPHeaders {
            guard let last = h.upstream.requests.last else { throw HarnessError("the upstream saw no request") }
            return last.headers
        }

        @Test func queryOnAVerifiedRequestCarriesTheBitsAndSpendsTheToken() async throws {
            let h = try await harness()
            let apple = try #require(h.apple)
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            apple.setBits(MockDeviceBits(bit0: true, bit1: false, lastUpdate: "2026-10"), device: "phone-1")
            let dc = try token("phone-1")
            let headers = try h.assertionHeaders(device, method: "GET", path: "/dc-bits/x", counter: 1, unsigned: true) + [dc]
            let r = try await h.send("GET", "/dc-bits/x", headers: headers)
            #expect(r.status == 200, "\(r.body)")
            var up = try forwarded(h)
            #expect(up["X-AssertGate-Trust"] == ["verified"])
            #expect(up["X-AssertGate-Device"] == ["valid"])
            #expect(up["X-AssertGate-Device-Bits"] == ["bit0=1, bit1=0, updated=2026-10"])
            // The flag rule (bit0 must be false) lists its reason; the require rule passed.
            #expect(up["X-AssertGate-Flags"] == ["device-bits-not-allowed"])
            // The token never reaches the upstream.
            #expect(up["AssertGate-Device-Token"] == [])
            #expect(apple.requests.filter { $0.endpoint == .query }.count == 1)

            // The same token again, with a fresh assertion: a replay.
            let again = try h.assertionHeaders(device, method: "GET", path: "/dc-bits/x", counter: 2, unsigned: true) + [dc]
            let replay = try await h.send("GET", "/dc-bits/x", headers: again)
            #expect(replay.status == 403)
            #expect(replay.json["reason"] as? String == "device-token-reused")

            // Bits the require rule refuses.
            apple.setBits(MockDeviceBits(bit0: false, bit1: true, lastUpdate: "2026-11"), device: "phone-1")
            let third = try h.assertionHeaders(device, method: "GET", path: "/dc-bits/x", counter: 3, unsigned: true)
                + [try token("phone-1")]
            let refused = try await h.send("GET", "/dc-bits/x", headers: third)
            #expect(refused.status == 403)
            #expect(refused.json["reason"] as? String == "device-bits-not-allowed")

            // Never set: both bits count as false, the header says unset.
            let fourth = try h.assertionHeaders(device, method: "GET", path: "/dc-bits/x", counter: 4, unsigned: true)
                + [try token("phone-2")]
            #expect(try await h.send("GET", "/dc-bits/x", headers: fourth).status == 200)
            up = try forwarded(h)
            #expect(up["X-AssertGate-Device-Bits"] == ["unset"])
            #expect(up["X-AssertGate-Flags"] == [])

            // No token at all on a deviceBits route.
            let fifth = try h.assertionHeaders(device, method: "GET", path: "/dc-bits/x", counter: 5, unsigned: true)
            let none = try await h.send("GET", "/dc-bits/x", headers: fifth)
            #expect(none.status == 401)
            #expect(none.json["reason"] as? String == "missing-device-token")
            try await h.stop()
        }

        @Test func deviceTrustIsTheFallbackWithoutAssertion() async throws {
            let h = try await harness()
            let ok = try await h.send("GET", "/dc-device/a", headers: [try token("tablet")])
            #expect(ok.status == 200, "\(ok.body)")
            let up = try forwarded(h)
            #expect(up["X-AssertGate-Trust"] == ["device"])
            #expect(up["X-AssertGate-Device"] == ["valid"])
            #expect(up["X-AssertGate-Key-Id"] == [])
            // The upstream can check it: device headers are signed with the rest.
            #expect(up["X-AssertGate-Signature"].count == 1)

            // Forged, missing and (in enforce) refused.
            let forged = try await h.send("GET", "/dc-device/a", headers: [("AssertGate-Device-Token", "AAAA")])
            #expect(forged.status == 403)
            #expect(forged.json["reason"] as? String == "invalid-device-token")
            let missing = try await h.send("GET", "/dc-device/a")
            #expect(missing.status == 401)
            #expect(missing.json["reason"] as? String == "missing-assertion")

            // A valid token a second time: a replay.
            let first = try token("tablet-2")
            #expect(try await h.send("GET", "/dc-device/a", headers: [first]).status == 200)
            let replayed = try await h.send("GET", "/dc-device/a", headers: [first])
            #expect(replayed.status == 403)
            #expect(replayed.json["reason"] as? String == "device-token-reused")
            // The same token spelled otherwise (no padding, the URL alphabet)
            // is the same token: reused too.
            let respelled = first.1.replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
            #expect(respelled != first.1)
            let again = try await h.send("GET", "/dc-device/a", headers: [(first.0, respelled)])
            #expect(again.json["reason"] as? String == "device-token-reused", "\(again.body)")

            // In monitor: valid is device trust, missing stays missing, reuse is marked.
            let watchedToken = try token("watch-1")
            #expect(try await h.send("GET", "/dc-watch/a", headers: [watchedToken]).status == 200)
            #expect(try forwarded(h)["X-AssertGate-Trust"] == ["device"])
            #expect(try forwarded(h)["X-AssertGate-Device-Bits"] == ["unset"])
            #expect(try await h.send("GET", "/dc-watch/a", headers: [watchedToken]).status == 200)
            #expect(try forwarded(h)["X-AssertGate-Trust"] == ["invalid"])
            #expect(try forwarded(h)["X-AssertGate-Reason"] == ["device-token-reused"])
            #expect(try forwarded(h)["X-AssertGate-Device"] == ["reused"])
            #expect(try await h.send("GET", "/dc-watch/a").status == 200)
            #expect(try forwarded(h)["X-AssertGate-Trust"] == ["missing"])
            #expect(try forwarded(h)["X-AssertGate-Device"] == ["missing"])

            // In monitor they are forwarded, marked.
            let watched = try await h.send("GET", "/dc-watch/a", headers: [("AssertGate-Device-Token", "BBBB")])
            #expect(watched.status == 200)
            #expect(try forwarded(h)["X-AssertGate-Trust"] == ["invalid"])
            #expect(try forwarded(h)["X-AssertGate-Reason"] == ["invalid-device-token"])
            #expect(try forwarded(h)["X-AssertGate-Device"] == ["invalid"])
            try await h.stop()
        }

        @Test func anAssertionTakesPrecedenceOverADeviceToken() async throws {
            let h = try await harness()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            // A forged assertion with a valid device token: judged by the assertion.
            let headers = try h.assertionHeaders(
                device, method: "GET", path: "/dc-device/x", counter: 1, unsigned: true, mutation: .badSignature)
                + [try token("phone-9")]
            let r = try await h.send("GET", "/dc-device/x", headers: headers)
            #expect(r.status == 403)
            #expect(r.json["reason"] as? String == "bad-signature")
            try await h.stop()
        }

        @Test func appleDownFollowsOnDeviceCheckError() async throws {
            var options = EnforcementHarness.Options()
            options.deviceCheck = true
            let log = RecordingLogHandler.Lines()
            options.log = log
            let h = try await EnforcementHarness.start(options)
            let apple = try #require(h.apple)
            for answer in [AppleMockAnswer.status(503, "down"), .stall] {
                apple.answerAlways(answer, for: .validate)
                let refused = try await h.send("GET", "/dc-device/a", headers: [try token("d-\(answer)")])
                #expect(refused.status == 503, "\(answer)")
                #expect(refused.json["reason"] as? String == "devicecheck-unavailable")
                let lenient = try await h.send("GET", "/dc-lenient/a", headers: [try token("e-\(answer)")])
                #expect(lenient.status == 200, "\(answer)")
                let up = try forwarded(h)
                #expect(up["X-AssertGate-Trust"] == ["unavailable"])
                #expect(up["X-AssertGate-Reason"] == ["devicecheck-unavailable"])
                #expect(up["X-AssertGate-Device"] == ["unavailable"])
            }
            // Apple refusing the gateway's key: unavailable, and said in the log (once).
            apple.answerAlways(.status(401, "Unable to verify authorization token"), for: .validate)
            let unauthorized = try await h.send("GET", "/dc-device/a", headers: [try token("f")])
            #expect(unauthorized.json["reason"] as? String == "devicecheck-unavailable")
            _ = try await h.send("GET", "/dc-device/a", headers: [try token("g")])
            // 429 last: after one, a worker leaves Apple alone for a while
            // (the next test), and the answers above had to reach Apple.
            apple.answerAlways(.status(429, "slow down"), for: .validate)
            let throttled = try await h.send("GET", "/dc-device/a", headers: [try token("t-1")])
            #expect(throttled.status == 503)
            #expect(throttled.json["reason"] as? String == "devicecheck-unavailable")
            let throttledLenient = try await h.send("GET", "/dc-lenient/a", headers: [try token("t-2")])
            #expect(throttledLenient.status == 200)
            #expect(try forwarded(h)["X-AssertGate-Device"] == ["unavailable"])
            let keyErrors = log.all.filter { $0.level == .error && $0.text.contains("DeviceCheck refused the gateway's key") }
            #expect(keyErrors.count == 1, "\(log.all)")
            #expect(keyErrors.first?.text.contains("deviceCheck.teamId, deviceCheck.keyId and deviceCheck.privateKey") == true)
            // Never the token or the JWT.
            #expect(!log.all.contains { $0.text.contains("eyJ") || $0.text.contains("AGDT") })
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase)
            #expect(metrics.body.contains(#"assertgate_devicecheck_calls_total{call="validate",result="unauthorized"} 2"#))
            // 503 and the stall, on both routes; 429 on both routes (asked, or answered as Apple would be).
            #expect(metrics.body.contains(#"assertgate_devicecheck_calls_total{call="validate",result="failed"} 4"#))
            #expect(metrics.body.contains(#"assertgate_devicecheck_calls_total{call="validate",result="throttled"} 2"#))
            try await h.stop()
        }

        /// After a 429 a worker stops asking Apple for a while (250 ms,
        /// doubling while 429s go on): three requests on one connection (one
        /// worker), each with its own token, make one call; the other two are
        /// answered as throttled without adding to Apple's count.
        @Test func aThrottledAppleIsLeftAloneForAWhile() async throws {
            let h = try await harness()
            let apple = try #require(h.apple)
            apple.answerAlways(.status(429, "slow down"), for: .validate)
            // HTTP/1.1 keep-alive, one after the other on one connection,
            // each with a token of its own (curl 7.88 cannot send a second
            // request on an h2c prior-knowledge connection).
            var args = ["-sS", "--http1.1"]
            for (i, device) in ["quiet-a", "quiet-b", "quiet-c"].enumerated() {
                let (name, value) = try token(device)
                if i > 0 { args.append("--next") }
                args += ["-H", "\(name): \(value)", "-o", "/dev/null", "-w", "%{http_code} ", h.base + "/dc-lenient/a"]
            }
            let r = try await Run.tool("curl", args)
            #expect(r.stdout == "200 200 200 ", "\(r.stdout) \(r.stderr)")
            #expect(apple.requests.filter { $0.endpoint == .validate }.count == 1)
            #expect(try await metric(h, #"assertgate_devicecheck_calls_total{call="validate",result="throttled"} 3"#))
            try await h.stop()
        }

        // MARK: bit updates from upstream answers (risk.md §3)

        /// Polls `condition` until it holds (bounded): delivery is asynchronous by design.
        private func eventually(
            _ what: String, within seconds: Double = 10, _ condition: () async throws -> Bool
        ) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while try await !condition() {
                guard Date() < deadline else { throw HarnessError("not within \(seconds) s: \(what)") }
                try await Task.sleep(for: .milliseconds(25))
            }
        }

        private func metric(_ h: EnforcementHarness, _ line: String) async throws -> Bool {
            try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body.contains(line)
        }

        @Test func anUpstreamSetsBitsThroughTheGateway() async throws {
            let h = try await harness()
            let apple = try #require(h.apple)
            let r = try await h.send(
                "GET", "/dc-device/promo", headers: [try token("promo-phone"), ("x-test-set-device-bits", "bit0=1")])
            #expect(r.status == 200)
            // Neither the instruction nor any trust-prefixed header reaches the client.
            #expect(r.headers["x-assertgate-set-device-bits"] == nil)
            #expect(r.headers["x-assertgate-trust"] == nil)
            try await eventually("the update reached Apple") { apple.bits(device: "promo-phone")?.bit0 == true }
            #expect(apple.bits(device: "promo-phone")?.bit1 == false)
            let updates = apple.requests.filter { $0.endpoint == .update }
            #expect(updates.count == 1)
            #expect(updates.first?.bit0 == true)
            #expect(updates.first?.bit1 == nil)  // only what the upstream asked
            // The next request from the same device sees the bit (a query route).
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let headers = try h.assertionHeaders(device, method: "GET", path: "/dc-bits/x", counter: 1, unsigned: true)
                + [try token("promo-phone")]
            #expect(try await h.send("GET", "/dc-bits/x", headers: headers).status == 200)
            #expect(try forwarded(h)["X-AssertGate-Device-Bits"].first?.hasPrefix("bit0=1, bit1=0") == true)
            try await eventually("the queue is empty again") {
                try await metric(h, "assertgate_devicecheck_update_queue_depth 0")
            }
            #expect(try await metric(h, #"assertgate_devicecheck_calls_total{call="update",result="ok"} 1"#))
            try await h.stop()
        }

        @Test func updatesAreRetriedThroughAnOutageAndSurviveARestart() async throws {
            let h = try await harness()
            let apple = try #require(h.apple)
            apple.answerAlways(.status(503, "down"), for: .update)
            let r = try await h.send(
                "GET", "/dc-device/a", headers: [try token("restart-phone"), ("x-test-set-device-bits", "bit1=1, bit0=0")])
            #expect(r.status == 200)
            try await eventually("two failed attempts") { apple.requests.filter { $0.endpoint == .update }.count >= 2 }
            // The gateway goes away with the update still owed; a new one delivers it.
            try await h.restartGateway()
            apple.reset()
            // Within the lease of a claim the old gateway may have held (30 s) plus a backoff.
            try await eventually("the update reached Apple after the restart", within: 45) {
                let bits = apple.bits(device: "restart-phone")
                return bits?.bit0 == false && bits?.bit1 == true
            }
            try await h.stop()
        }

        @Test func updatesWithoutAnAcceptedTokenOrMalformedAreNeverSent() async throws {
            let h = try await harness()
            let apple = try #require(h.apple)
            // Monitor, no token: forwarded as missing; the upstream's instruction has no token to use.
            let missing = try await h.send("GET", "/dc-watch/a", headers: [("x-test-set-device-bits", "bit0=1")])
            #expect(missing.status == 200)
            // A refused token is not usable either.
            _ = try await h.send("GET", "/dc-watch/a", headers: [("AssertGate-Device-Token", "CCCC"), ("x-test-set-device-bits", "bit0=1")])
            // Malformed instructions.
            for bad in ["bit0=2", "bit0=1, bit0=0", "bit2=1", "yes"] {
                let r = try await h.send("GET", "/dc-device/a", headers: [try token("m-\(bad)"), ("x-test-set-device-bits", bad)])
                #expect(r.status == 200)
                #expect(r.headers["x-assertgate-set-device-bits"] == nil)
            }
            #expect(try await metric(h, #"assertgate_devicecheck_calls_total{call="update",result="no-token"} 2"#))
            #expect(try await metric(h, #"assertgate_devicecheck_calls_total{call="update",result="malformed"} 4"#))
            #expect(apple.requests.filter { $0.endpoint == .update }.isEmpty)
            try await h.stop()
        }

        @Test func updatesAreDroppedAfterUpdateRetryFor() async throws {
            var options = EnforcementHarness.Options()
            options.deviceCheck = true
            options.updateRetryFor = "1s"
            let h = try await EnforcementHarness.start(options)
            let apple = try #require(h.apple)
            apple.answerAlways(.status(500, "broken"), for: .update)
            _ = try await h.send("GET", "/dc-device/a", headers: [try token("late"), ("x-test-set-device-bits", "bit0=1")])
            try await eventually("dropped after 1 s of failures") {
                try await metric(h, #"assertgate_devicecheck_calls_total{call="update",result="expired"} 1"#)
            }
            // Apple answers again: nothing is left to deliver.
            apple.answerAlways(.normal, for: .update)
            let attempts = apple.requests.filter { $0.endpoint == .update }.count
            #expect(attempts >= 1)
            #expect(apple.bits(device: "late") == nil)
            try await h.stop()
        }

        /// DeviceCheck, the gateway's warnings and errors recorded, and `configure`'s options.
        private func loggedHarness(
            _ configure: (inout EnforcementHarness.Options) -> Void
        ) async throws -> (EnforcementHarness, RecordingLogHandler.Lines) {
            var options = EnforcementHarness.Options()
            options.deviceCheck = true
            let log = RecordingLogHandler.Lines()
            options.log = log
            configure(&options)
            return (try await EnforcementHarness.start(options), log)
        }

        /// DeviceCheck with an update worker that looks at the queue every 20 ms
        /// and claims `batch` updates a look.
        private func fastUpdater(batch: Int) async throws -> (EnforcementHarness, AppleMockServer) {
            var options = EnforcementHarness.Options()
            options.deviceCheck = true
            options.updatePollEvery = "20ms"
            options.updateBatch = batch
            let h = try await EnforcementHarness.start(options)
            return (h, try #require(h.apple))
        }

        /// Sends each head to `/dc-device/a` at once; each must be answered 200.
        private func sendTogether(_ h: EnforcementHarness, _ requests: [[(String, String)]]) async throws {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for headers in requests {
                    group.addTask { try await h.send("GET", "/dc-device/a", headers: headers).status }
                }
                for try await status in group { #expect(status == 200) }
            }
        }

        /// `updateBatch` bounds what one look at the queue sends to Apple at
        /// once. A first update that Apple leaves unanswered keeps the worker
        /// busy (until the 400 ms timeout) while three more are queued; the
        /// next look takes two of them, and the third can only go once Apple
        /// (300 ms a call) has answered those. With the default batch all
        /// three would arrive together.
        @Test func updateBatchBoundsTheUpdatesInFlight() async throws {
            let (h, apple) = try await fastUpdater(batch: 2)
            let appleTakes = TimeAmount.milliseconds(300)
            apple.script([.stall], for: .update)
            apple.setLatency(appleTakes, for: .update)
            func setBit(_ device: String) async throws -> Int {
                try await h.send("GET", "/dc-device/a", headers: [try token(device), ("x-test-set-device-bits", "bit1=1")]).status
            }
            #expect(try await setBit("batch-blocker") == 200)
            try await eventually("the first update is with Apple") { apple.requests.contains { $0.endpoint == .update } }
            let devices = ["batch-a", "batch-b", "batch-c"]
            let requests = try devices.map { [try token($0), ("x-test-set-device-bits", "bit1=1")] }
            try await sendTogether(h, requests)
            try await eventually("the three delivered") { devices.allSatisfy { apple.bits(device: $0)?.bit1 == true } }
            let arrivals = apple.requests.filter { $0.endpoint == .update && devices.contains($0.device ?? "") }
                .map(\.receivedAt).sorted()
            #expect(arrivals.count == 3)
            if arrivals.count == 3 { #expect(arrivals[2] - arrivals[0] >= appleTakes) }
            try await h.stop()
        }

        /// A 429 to a bit update pauses the whole worker (500 ms, doubling),
        /// not only that update: the next queued update, due at once, waits
        /// (one update a look, a look every 20 ms: without the pause it went
        /// 20 ms later).
        @Test func aThrottledUpdatePausesTheWorker() async throws {
            let (h, apple) = try await fastUpdater(batch: 1)
            apple.answerAlways(.status(429, "slow down"), for: .update)
            let requests = try ["pause-a", "pause-b", "pause-c"].map { [try token($0), ("x-test-set-device-bits", "bit0=1")] }
            try await sendTogether(h, requests)
            try await eventually("two update attempts") { apple.requests.filter { $0.endpoint == .update }.count >= 2 }
            let arrivals = apple.requests.filter { $0.endpoint == .update }.map(\.receivedAt).sorted()
            #expect(arrivals[1] - arrivals[0] >= .milliseconds(450), "\(arrivals)")
            try await h.stop()
        }

        /// The update worker is made at start: a reload that changes its
        /// batch says that it needs a restart.
        @Test func aReloadThatChangesTheUpdateWorkerSaysItNeedsARestart() async throws {
            let (h, log) = try await loggedHarness { $0.updateBatch = 2 }
            try await h.reload { $0.replacingOccurrences(of: "updateBatch: 2", with: "updateBatch: 3") }
            #expect(log.all.contains { $0.level == .warning && $0.text.contains("deviceCheck changed") }, "\(log.all)")
            try await h.stop()
        }

        /// `deviceCheck.maxQueuedUpdates`: with one update owed (Apple
        /// stalls it), a second finds the queue full: dropped, counted and
        /// logged, and the client's answer goes on.
        @Test func aFullUpdateQueueDropsTheUpdateAndSaysSo() async throws {
            let (h, log) = try await loggedHarness { $0.maxQueuedUpdates = 1 }
            let apple = try #require(h.apple)
            apple.answerAlways(.stall, for: .update)
            for device in ["full-a", "full-b"] {
                let r = try await h.send("GET", "/dc-device/a", headers: [try token(device), ("x-test-set-device-bits", "bit0=1")])
                #expect(r.status == 200)
            }
            #expect(try await metric(h, #"assertgate_devicecheck_calls_total{call="update",result="queue-full"} 1"#))
            #expect(log.all.contains { $0.level == .error && $0.text.contains("bit-update queue is full") }, "\(log.all)")
            try await h.stop()
        }

        @Test func aReloadCannotAddDeviceCheck() async throws {
            let h = try await EnforcementHarness.start()
            let text = try String(contentsOfFile: h.configPath, encoding: .utf8)
            try (text + "\ndeviceCheck: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: HOME}}\n")
                .write(toFile: h.configPath, atomically: true, encoding: .utf8)
            let r = try await h.send(
                "POST", "/reload", headers: [("Authorization", "Bearer \(EnforcementHarness.adminToken)")], http1: true,
                base: h.adminBase)
            #expect(r.status != 200)
            #expect(r.body.contains("deviceCheck: added by this reload"), "\(r.body)")
            try await h.stop()
        }

        /// A client that gives up while its answer waits for the bit update to
        /// be written (the store's writes paused): the update is still made,
        /// and the gateway serves on.
        @Test func aClientLeavingWhileItsAnswerWaitsForTheQueue() async throws {
            var options = EnforcementHarness.Options()
            options.deviceCheck = true
            // The enqueue waits out the pause below instead of timing out.
            options.commandTimeout = "10s"
            let h = try await EnforcementHarness.start(options)
            let apple = try #require(h.apple)
            let tokenHeader = try token("leaver")
            let before = h.upstream.requests.count
            async let gaveUp = Run.tool("curl", [
                "-sS", "--http2-prior-knowledge", "--max-time", "3", "-o", "/dev/null", "-w", "%{http_code}",
                "-H", "\(tokenHeader.0): \(tokenHeader.1)", "-H", "x-test-set-device-bits: bit1=1",
                "\(h.base)/dc-device/slow?ms=1500",
            ])
            // Once the upstream has the request (the token's claim is written by
            // then; it answers 1.5 s later), the store stops taking writes for
            // 5 s: the enqueue, and so the answer, wait past curl's 3 s.
            try await eventually("the upstream got the request") { h.upstream.requests.count > before }
            let paused = try await Run.tool("redis-cli", ["-p", String(h.redis.port), "CLIENT", "PAUSE", "5000", "WRITE"])
            #expect(paused.status == 0 && paused.stdout.contains("OK"), "\(paused.stderr)")
            let result = try await gaveUp
            // curl gave up (exit 28) without an answer: the head was being held.
            #expect(result.status == 28, "\(result.status) \(result.stdout) \(result.stderr) paused=\(paused.stdout)")
            // The update is made once the store takes writes again.
            try await eventually("the update reached Apple", within: 20) { apple.bits(device: "leaver")?.bit1 == true }
            // The gateway serves on.
            let next = try await h.send("GET", "/dc-device/b", headers: [try token("after")])
            #expect(next.status == 200)
            try await h.stop()
        }
    }
}
