import AssertGateTestSupport
import AssertGateCore
import DeviceSim
import Foundation
import Testing
import Verifier

extension Integration {
    /// Redis outages, the admin API, reload, the one-round-trip budget and the
    /// device tool, against the server as `assertgate serve` builds it.
    @Suite(.serialized) struct OperationsTests {
        @Test func redisStoppedAndRestartedDuringTraffic() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            #expect(try await h.send("GET", "/enforce/1", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/1", counter: 1)).status == 200)

            h.redis.stop()
            let enforce = try await h.send("GET", "/enforce/2", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/2", counter: 2))
            #expect(enforce.status == 503)
            #expect(enforce.reason == "store-unavailable")
            let monitor = try await h.send("GET", "/monitor/2", headers: h.assertionHeaders(device, method: "GET", path: "/monitor/2", counter: 3))
            #expect(monitor.status == 200)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "unavailable")
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-reason") == "store-unavailable")
            let lenient = try await h.send("GET", "/lenient/2", headers: h.assertionHeaders(device, method: "GET", path: "/lenient/2", counter: 4))
            #expect(lenient.status == 200)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "unavailable")
            let passthrough = try await h.send("GET", "/open/2")
            #expect(passthrough.status == 200)
            let challenge = try await h.send("POST", EnforcementHarness.prefix + "/challenge", body: #"{"keyId":"\#(device.keyIdBase64)","purpose":"assert"}"#)
            #expect(challenge.status == 503)
            #expect(challenge.reason == "store-unavailable")
            let notReady = try await h.send("GET", "/readyz", http1: true, base: h.adminBase)
            #expect(notReady.status == 503)

            // Same port again (the data is gone with the process: attest anew).
            try h.redis.start()
            let deadline = Date().addingTimeInterval(10)
            var ready = false
            while Date() < deadline {
                // Polling an external process (redis-server) coming back, bounded by a deadline.
                if try await h.send("GET", "/readyz", http1: true, base: h.adminBase).status == 200 {
                    ready = true
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(ready)
            let fresh = try h.newDevice()
            #expect(try await h.attest(fresh).status == 201)
            let after = try await h.send("GET", "/enforce/3", headers: h.assertionHeaders(fresh, method: "GET", path: "/enforce/3", counter: 1))
            #expect(after.status == 200, "\(after.body)")
            try await h.stop()
        }

        @Test func adminTokenReloadAndConfigInvalid() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let path = "/keys/\(device.keyIdBase64URL)"
            let noToken = try await h.send("GET", path, http1: true, base: h.adminBase)
            #expect(noToken.status == 401)
            #expect(noToken.reason == "unauthorized")
            let wrong = try await h.send("GET", path, headers: [("Authorization", "Bearer nope")], http1: true, base: h.adminBase)
            #expect(wrong.status == 401)
            let auth = [("Authorization", "Bearer \(EnforcementHarness.adminToken)")]
            let unknown = try await h.send("GET", "/keys/\(Verifier.Base64.encodeURL([UInt8](repeating: 5, count: 32)))", headers: auth, http1: true, base: h.adminBase)
            #expect(unknown.status == 404)
            #expect(unknown.reason == "unknown-key")

            // A broken file: 400 config-invalid, and the running configuration keeps serving.
            let good = try String(contentsOfFile: h.configPath, encoding: .utf8)
            try (good + "bogusKey: 1\n").write(toFile: h.configPath, atomically: true, encoding: .utf8)
            let refused = try await h.send("POST", "/reload", headers: auth, http1: true, base: h.adminBase)
            #expect(refused.status == 400)
            #expect(refused.reason == "config-invalid")
            #expect(refused.body.contains("bogusKey"))
            #expect(try await h.send("GET", "/enforce/a", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: 1)).status == 200)

            // An https:// upstream whose CA file parses as PEM but does not load: refused too, naming it.
            let badCA = h.configPath + ".upstream-ca.pem"
            try "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".write(toFile: badCA, atomically: true, encoding: .utf8)
            try good.replacingOccurrences(
                of: "upstreams:\n", with: "upstreams:\n  secure: {endpoints: [https://127.0.0.1:9], tls: {caFile: \(badCA)}}\n"
            ).write(toFile: h.configPath, atomically: true, encoding: .utf8)
            let badTLS = try await h.send("POST", "/reload", headers: auth, http1: true, base: h.adminBase)
            #expect(badTLS.status == 400)
            #expect(badTLS.body.contains("upstreams.secure.tls"), "\(badTLS.body)")
            #expect(try await h.send("GET", "/enforce/a", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: 2)).status == 200)

            // A valid change is applied to new requests: /enforce/ becomes monitor.
            try good.replacingOccurrences(of: "{prefix: /enforce/}, upstream: legacy, mode: enforce", with: "{prefix: /enforce/}, upstream: legacy, mode: monitor")
                .write(toFile: h.configPath, atomically: true, encoding: .utf8)
            let applied = try await h.send("POST", "/reload", headers: auth, http1: true, base: h.adminBase)
            #expect(applied.status == 200, "\(applied.body)")
            let monitored = try await h.send("GET", "/enforce/a")
            #expect(monitored.status == 200)
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-trust") == "missing")

            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase)
            #expect(metrics.body.contains(#"assertgate_config_reloads_total{result="failure"} 2"#))
            #expect(metrics.body.contains(#"assertgate_config_reloads_total{result="success"} 1"#))
            #expect(metrics.body.contains(#"assertgate_requests_total{route="legacy",status="200",trust="verified"} 2"#))
            try await h.stop()
        }

        /// `limits.maxConnectionsPerAddress` and `limits.maxConnections` close
        /// a connection as it is accepted, over raw sockets from three loopback
        /// addresses; `/metrics` of `serve` counts the refusals and the open
        /// connections, and a closed connection frees its place.
        @Test func connectionCapsCloseNewConnectionsAtAccept() async throws {
            var options = EnforcementHarness.Options()
            options.extraTopLevel = "limits: {maxConnections: 4, maxConnectionsPerAddress: 3}"
            let h = try await EnforcementHarness.start(options)
            let port = String(h.server.ports[0])
            let sources = ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.3"]
            let client = Integration.HardeningTests.Client(["conn-cap", port, sources.joined(separator: ",")])
            func metrics() async throws -> String { try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body }
            // Every connection answered or closed, all still held.
            #expect(try await client.reached(step: "held"), "hardening.py never held its connections")
            let held = try await Integration.HardeningTests.eventuallyAsync(within: 20) {
                let m = try await metrics()
                return m.contains(#"assertgate_open_connections{protocol="h2"} 4"#)
                    && m.contains(#"assertgate_connections_refused_total{reason="max-connections"} 1"#)
            }
            let seen = try await metrics()
            #expect(held, "\(seen)")
            #expect(seen.contains(#"assertgate_connections_refused_total{reason="max-connections-per-address"} 1"#))
            #expect(h.server.openConnections == 4)
            // Full: an ordinary request is closed as well.
            let refused = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", h.base + "/open/a"])
            #expect(refused.stdout == "000")
            client.go()
            let result = try await client.finish()
            #expect(result["results"] as? [String] == ["served", "served", "served", "closed", "served", "closed"])
            #expect(try await Integration.HardeningTests.eventually(within: 10) { h.server.openConnections == 0 })
            #expect(try await h.send("GET", "/open/a").status == 200)
            let after = try await metrics()
            #expect(after.contains(#"assertgate_open_connections{protocol="h2"} 0"#), "\(after)")
            #expect(after.contains(#"assertgate_connections_refused_total{reason="max-connections"} 2"#))
            try await h.stop()
        }

        /// `assertgate_open_streams` through `serve`: a request in flight
        /// counts (each worker counts its own, the gauge adds them), then not.
        @Test func openStreamsFollowARequestInFlight() async throws {
            let h = try await EnforcementHarness.start()
            let before = h.upstream.requests.count
            let slow = Task { try await h.send("GET", "/open/slow?ms=3000") }
            func metrics() async throws -> String { try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body }
            // The upstream has it and answers in 3 s: the request is in flight now.
            #expect(try await Integration.HardeningTests.eventually(within: 10) { h.upstream.requests.count > before })
            let during = try await metrics()
            #expect(during.contains("assertgate_open_streams 1\n"), "\(during.split(separator: "\n").filter { $0.contains("open_") })")
            let answered = try await slow.value
            #expect(answered.status == 200, "\(answered.status) \(answered.body)")
            #expect(try await Integration.HardeningTests.eventuallyAsync(within: 5) {
                try await metrics().contains("assertgate_open_streams 0\n")
            })
            try await h.stop()
        }

        /// `store.redis.password: {file: …}` against a Redis with
        /// `requirepass`: the password is in neither the config file nor the
        /// log, and the gateway attests and verifies through that Redis.
        @Test func redisPasswordFromAFile() async throws {
            var options = EnforcementHarness.Options()
            let password = "pa ss:w@rd/#1"
            options.redisPassword = password
            let log = RecordingLogHandler.Lines()
            options.log = log
            let h = try await EnforcementHarness.start(options)
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let asserted = try await h.send(
                "GET", "/enforce/a", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: 1))
            #expect(asserted.status == 200)
            #expect(try await h.send("GET", "/readyz", http1: true, base: h.adminBase).status == 200)
            // The key went to the Redis that wants the password.
            #expect((try h.redis.run(["DBSIZE"], password: password).int64 ?? 0) > 0)
            #expect(try !String(contentsOfFile: h.configPath, encoding: .utf8).contains(password))
            #expect(!log.all.contains { $0.text.contains(password) })
            try await h.stop()
        }

        /// Two reloads at once: one runs, the other is refused at once (not
        /// queued), and the running configuration is swapped exactly once.
        @Test func aReloadWhileAnotherRunsIsRefused() async throws {
            let h = try await EnforcementHarness.start()
            // Every worker loop held: a reload waits there to swap its snapshot,
            // so whichever of the two takes the reload first is still running
            // when the other arrives.
            let loops = h.server.workerEventLoops
            let release = DispatchSemaphore(value: 0)
            for loop in loops { loop.execute { release.wait() } }
            // nil: the deadline, so a reload that waits instead of refusing fails
            // the test rather than holding the loops forever.
            await withTaskGroup(of: Result<Void, AdminReloadError>?.self) { group in
                group.addTask { await h.server.reload() }
                group.addTask { await h.server.reload() }
                group.addTask {
                    try? await Task.sleep(for: .seconds(10))
                    return nil
                }
                let first = await group.next() ?? nil
                for _ in loops { release.signal() }
                var second: Result<Void, AdminReloadError>?
                while second == nil, let next = await group.next() { second = next }
                group.cancelAll()
                guard case .failure(let refused) = first else {
                    Issue.record("no reload was refused while the other ran: \(String(describing: first))")
                    return
                }
                #expect(refused.message == "another reload is in progress; try again")
                if case .failure(let e) = second { Issue.record("the running reload failed: \(e.message)") }
            }
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase)
            #expect(metrics.body.contains("assertgate_config_reloads_total{result=\"success\"} 1\n"))
            #expect(!metrics.body.contains("assertgate_config_reloads_total{result=\"failure\"} 1\n"))
            try await h.stop()
        }

        @Test func everyReasonOfTheRunIsCountedInMetrics() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            _ = try await h.send("GET", "/enforce/a")
            _ = try await h.send("GET", "/enforce/a", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/b", counter: 1))
            // Forwarded (monitor): counted apart from what the gateway answered itself.
            let monitored = try await h.send("GET", "/monitor/a", headers: h.assertionHeaders(device, method: "GET", path: "/monitor/a", counter: 0))
            #expect(monitored.status == 200)
            // Answered outside the assertion gate: the route table, the attest route, the HTTP/1.1 front end.
            #expect(try await h.send("GET", "/nowhere").status == 404)
            #expect(try await h.send("POST", EnforcementHarness.prefix + "/attest", body: "{").status == 400)
            let big = try await h.send("GET", "/open/a", headers: [("X-Big", String(repeating: "b", count: 70_000))], http1: true)
            #expect(big.status == 431)
            // Over HTTP/2 too the answer is 431, and counted. Many small fields: the
            // list is counted as HTTP/2 counts it (+32 per field), while nghttp2
            // clients refuse to send a block over 64 KiB of raw bytes.
            var manyFields: [String] = []
            for i in 0..<1_800 { manyFields += ["-H", "X-H\(i): v"] }
            let bigH2 = try await Run.tool(
                "curl", ["-sS", "--http2-prior-knowledge", "--max-time", "10", "-w", "\n%{http_code}"] + manyFields
                    + [h.base + "/open/a"])
            #expect(bigH2.stdout.hasSuffix("\n431"), "\(bigH2.stdout) \(bigH2.stderr)")
            #expect(bigH2.stdout.contains("\"reason\":\"headers-too-large\""))
            // Oversized trailers reset a request already under way: its pipeline
            // reports it (aborted), and it is not counted a second time as a refusal.
            let bodyFile = NSTemporaryDirectory() + "trailers-\(UUID().uuidString).body"
            try "x".write(toFile: bodyFile, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: bodyFile) }
            var trailers: [String] = []
            for i in 0..<1_800 { trailers.append("--trailer=x-t\(i): v") }
            _ = try await Run.tool("nghttp", ["-d", bodyFile] + trailers + [h.base + "/open/a"], timeout: 20)
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            for (reason, count) in [
                ("missing-assertion", 1), ("bad-signature", 1), ("counter-replay", 0), ("no-route", 1),
                ("malformed-request", 1), ("headers-too-large", 2),
            ] {
                #expect(metrics.contains(#"assertgate_rejections_total{reason="\#(reason)"} \#(count)"#), "\(reason)")
            }
            #expect(metrics.contains(#"assertgate_unverified_forwards_total{reason="counter-replay"} 1"#))
            #expect(metrics.contains(#"assertgate_unverified_forwards_total{reason="missing-assertion"} 0"#))
            try await h.stop()
        }

        @Test func enforcementDurationIsObservedPerModeAndNotForPassthrough() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let accepted = try await h.send(
                "GET", "/enforce/a", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/a", counter: 1))
            #expect(accepted.status == 200)
            #expect(try await h.send("GET", "/enforce/a").status == 401)  // decided without the store
            // Rejected by the commit (counter not above the stored one), forwarded in monitor.
            let replay = try await h.send(
                "GET", "/monitor/a", headers: h.assertionHeaders(device, method: "GET", path: "/monitor/a", counter: 1))
            #expect(replay.status == 200)
            #expect(try await h.send("GET", "/open/a").status == 200)
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            #expect(metrics.contains(#"assertgate_enforcement_duration_seconds_count{mode="enforce"} 2"#), "\(metrics)")
            #expect(metrics.contains(#"assertgate_enforcement_duration_seconds_count{mode="monitor"} 1"#))
            // Every check of this run finished within the largest finite bucket.
            #expect(metrics.contains(#"assertgate_enforcement_duration_seconds_bucket{mode="enforce",le="5"} 2"#))
            #expect(metrics.contains(#"assertgate_enforcement_duration_seconds_bucket{mode="monitor",le="5"} 1"#))
            #expect(!metrics.contains(#"assertgate_enforcement_duration_seconds_count{mode="passthrough"}"#))
            try await h.stop()
        }

        @Test func oneRedisRoundTripPerAssertedRequest() async throws {
            let h = try await EnforcementHarness.start()
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            // Warm the worker's key cache on both workers (connections land on either loop).
            var counter: UInt32 = 0
            for _ in 0..<4 {
                counter += 1
                #expect(try await h.send("GET", "/enforce/w", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/w", counter: counter)).status == 200)
            }
            try h.redis.run(["CONFIG", "RESETSTAT"])
            let n = 20
            for _ in 0..<n {
                counter += 1
                #expect(try await h.send("GET", "/enforce/r", headers: h.assertionHeaders(device, method: "GET", path: "/enforce/r", counter: counter)).status == 200)
            }
            let stats = try h.redis.run(["INFO", "commandstats"]).string ?? ""
            func calls(_ command: String) -> Int {
                guard let line = stats.split(separator: "\r\n").first(where: { $0.hasPrefix("cmdstat_\(command):") }),
                    let field = line.split(separator: ",").first(where: { $0.contains("calls=") })
                else { return 0 }
                return Int(field.split(separator: "=").last ?? "") ?? 0
            }
            #expect(calls("evalsha") == n)
            // Nothing else went to Redis from a client: the HMGET/HSET calls are the script's own.
            let clientCommands = try h.redis.run(["INFO", "stats"]).string ?? ""
            #expect(clientCommands.contains("total_commands_processed"))
            #expect(calls("get") == 0 && calls("set") == 0 && calls("eval") == 0)
            try await h.stop()
        }

        @Test func deviceToolAttestsRequestsAndShowsReplay() async throws {
            guard let tool = BuiltProduct.path("assertgate-device") else {
                Issue.record("assertgate-device is not built next to the tests")
                return
            }
            let state = NSTemporaryDirectory() + "assertgate-device-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: state) }
            let initCA = try await Run.tool(tool, ["init-ca", "--state", state])
            #expect(initCA.status == 0, "\(initCA.stderr)")
            let h = try await EnforcementHarness.start(.init(caDirectory: state + "/ca"))
            let common = ["--gateway", h.base, "--state", state]
            let attest = try await Run.tool(tool, ["attest", "--user-id", "carol"] + common)
            #expect(attest.status == 0, "\(attest.stdout) \(attest.stderr)")
            #expect(attest.stdout.contains(#""trust":"attested""#))
            let request = try await Run.tool(tool, ["request", "POST", "/enforce/pay", "--body", #"{"n":1}"#] + common)
            #expect(request.status == 0, "\(request.stdout) \(request.stderr)")
            #expect(request.stdout.contains("HTTP 200"))
            #expect(h.lastUpstreamHead?.headers.first(name: "x-assertgate-user") == "carol")
            let replay = try await Run.tool(tool, ["request", "POST", "/enforce/pay", "--body", #"{"n":1}"#, "--replay"] + common)
            #expect(replay.status == 1)
            #expect(replay.stdout.contains("counter-replay"))
            let http1 = try await Run.tool(tool, ["request", "GET", "/enforce/h1", "--http1.1"] + common)
            #expect(http1.stdout.contains("HTTP 200"), "\(http1.stdout) \(http1.stderr)")
            let load = try await Run.tool(
                tool, ["load", "--path", "/enforce/load", "--connections", "2", "--streams", "4", "--requests", "200", "--json"] + common)
            #expect(load.status == 0, "\(load.stderr)")
            #expect(load.stdout.contains(#""failures""#) || load.stdout.contains("succe"))
            try await h.stop()
        }
    }
}

/// Executables of this package, found next to the test bundle.
enum BuiltProduct {
    static func path(_ name: String) -> String? {
        var dir = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = dir.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }
}
