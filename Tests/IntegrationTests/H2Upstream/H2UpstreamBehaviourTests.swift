import AssertGateCore
import AssertGateTestSupport
import Foundation
import Testing

extension Integration {
    /// An `h2c://` upstream that misbehaves on request (python3-h2,
    /// `h2_scripted_upstream.py`), behind an in-process gateway, reached
    /// with nghttp and curl: trailers both ways, resets both ways, a stream
    /// refused by GOAWAY sent again, `grpc-timeout` capping the wait, and
    /// streams multiplexed on few connections.
    @Suite(.serialized) struct H2UpstreamBehaviourTests {
        struct Stats: Decodable {
            let connections: Int
            let resets: Int
            let maxConcurrent: Int
            let hangs: Int
        }

        struct Echo: Decodable {
            let headers: [String: String]
            let trailers: [String: String]
            let bodyLength: Int
        }

        static func upstream() throws -> PythonScriptServer {
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("h2_scripted_upstream.py").path
            return try PythonScriptServer(scriptPath: script)
        }

        static func gateway(_ up: PythonScriptServer, configure: (inout GatewayConfig) -> Void = { _ in }) async throws -> Harness {
            try await Harness.start(
                upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port, scheme: .h2c)], threads: 1,
                configure: configure)
        }

        /// `h2_trailer_client.py` through the gateway: 5 bytes and request
        /// trailers to `path`, whose answer is the upstream's echo.
        static func postWithTrailers(_ h: Harness, _ path: String) async throws -> Echo {
            let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("h2_trailer_client.py").path
            let r = try await Run.tool("/usr/bin/python3", [client, String(h.port), path])
            #expect(r.status == 0, "\(r.stderr)")
            return try JSONDecoder().decode(Echo.self, from: Data(r.stdout.utf8))
        }

        /// Straight from the upstream (not through the gateway).
        static func stats(_ up: PythonScriptServer) async throws -> Stats {
            let r = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "http://127.0.0.1:\(up.port)/stats"])
            return try JSONDecoder().decode(Stats.self, from: Data(r.stdout.utf8))
        }

        /// Polls `/stats` until `done` holds (bounded): the upstream sees a
        /// reset some time after the client's, with nothing to wait on.
        static func waitForStats(_ up: PythonScriptServer, _ done: (Stats) -> Bool) async throws -> Stats {
            let deadline = Date().addingTimeInterval(10)
            var last = try await stats(up)
            while !done(last), Date() < deadline {
                try await Task.sleep(for: .milliseconds(50))
                last = try await stats(up)
            }
            return last
        }

        @Test func bodyAndTrailersReachAnHTTP2ClientAndTrustTrailersDoNot() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            let r = try await Run.tool("nghttp", ["-v", "\(h.base)/ok"])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout.contains(":status: 200"))
            #expect(r.stdout.contains("x-up-trailer: done"))
            // The upstream's forged trust trailer never reaches the client.
            #expect(!r.stdout.lowercased().contains("x-assertgate-trust: forged"))
            // HTTP/1.1 clients get the body, without trailers.
            let plain = try await Run.tool("curl", ["-sS", "--http1.1", "\(h.base)/ok"])
            #expect(plain.stdout == "ok")
            try await h.stop()
        }

        @Test func requestTrailersAndTEReachTheUpstreamWithoutTrustNames() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            let echo = try await Self.postWithTrailers(h, "/echo")
            #expect(echo.bodyLength == 5)
            #expect(echo.trailers["x-client-trailer"] == "1")
            #expect(echo.trailers["x-assertgate-trust"] == nil)
            #expect(echo.trailers["x-forwarded-for"] == nil)
            #expect(echo.headers["te"] == "trailers")
            #expect(echo.headers["x-assertgate-trust"] == "none")
            try await h.stop()
        }

        /// A request whose route was chosen by another reading of its path (here
        /// letter case: the strictest route any reading selects applies) is
        /// replayed on that same route, not on the one its raw path matches
        /// (another upstream, another protocol: the HTTP/2 head on an HTTP/1.1
        /// connection trapped the process).
        @Test func aRefusedRequestIsReplayedOnTheRouteItWasLeasedFor() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Harness.start(threads: 1) {
                $0.upstreams["h2"] = UpstreamConfig(endpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port, scheme: .h2c)])
                $0.routes.insert(RouteConfig(match: RouteMatch(kind: .exact("/refuse-once")), upstream: "h2", mode: .monitor), at: 0)
            }
            let r = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-w", " %{http_code}", "\(h.base)/REFUSE-ONCE"])
            #expect(r.stdout == "second 200", "\(r.stdout) \(r.stderr)")
            #expect(h.upstream.requests.isEmpty, "the HTTP/1.1 upstream of the catch-all saw it")
            try await h.stop()
        }

        /// A stream refused by GOAWAY is sent again with its body and its
        /// trailers (a gRPC call's), which went to the refused stream first.
        @Test func aRefusedRequestIsSentAgainWithItsTrailers() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            let warm = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(h.base)/ok"])
            #expect(warm.stdout == "ok")
            let echo = try await Self.postWithTrailers(h, "/refuse-once-echo")
            #expect(echo.bodyLength == 5)
            #expect(echo.trailers["x-client-trailer"] == "1")
            #expect(try await Self.stats(up).connections == 3)  // refused on the first, sent again on a second
            try await h.stop()
        }

        @Test func anUpstreamResetMidResponseResetsTheClientStream() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            // The reset arrives with (or before) the head it followed: the client's
            // stream is reset, never ended as if the answer were whole.
            let r = try await Run.tool("nghttp", ["-v", "\(h.base)/reset-after-head"])
            #expect(r.stdout.contains("recv RST_STREAM frame <length=4, flags=0x00, stream_id=13>"), "\(r.stdout)")
            #expect(!r.stdout.contains("; END_STREAM\n"), "\(r.stdout)")
            #expect(r.stdout.contains("error_code=INTERNAL_ERROR(0x02)"))
            // The upstream's own code is passed on (gRPC reads CANCEL as CANCELLED).
            let cancel = try await Run.tool("nghttp", ["-v", "\(h.base)/cancel-after-head"])
            #expect(cancel.stdout.contains("error_code=CANCEL(0x08)"), "\(cancel.stdout)")
            // NO_ERROR on an unfinished response would let the client take the
            // truncated body as whole: passed on as INTERNAL_ERROR.
            let noError = try await Run.tool("nghttp", ["-v", "\(h.base)/noerror-after-head"])
            #expect(noError.stdout.contains("error_code=INTERNAL_ERROR(0x02)"), "\(noError.stdout)")
            #expect(!noError.stdout.contains("; END_STREAM\n"), "\(noError.stdout)")
            // A code about the upstream hop (nghttp2's verdict on it, often) is
            // no client's protocol error: INTERNAL_ERROR.
            let flow = try await Run.tool("nghttp", ["-v", "\(h.base)/flow-after-head"])
            #expect(flow.stdout.contains("error_code=INTERNAL_ERROR(0x02)"), "\(flow.stdout)")
            // Before the head: the gateway answers 502 itself.
            let early = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-D", "-", "\(h.base)/reset-before-head"])
            #expect(early.stdout.contains(" 502"))
            #expect(early.stdout.contains("\"reason\":\"upstream-unavailable\""))
            try await h.stop()
        }

        /// What an HTTP/2 upstream's head may not pass on: a status outside
        /// 200–599 (502: nghttp2 checks three digits only), trust-prefixed
        /// fields spelled with `_` and `te` (removed). A head in more
        /// CONTINUATIONs than a client may send fails its own stream (502,
        /// over the header limit) and the connection serves on.
        @Test func anUpstreamHeadIsHeldToWhatAClientMayBeSent() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            for path in ["/status-099", "/status-600"] {
                let r = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-D", "-", "\(h.base)\(path)"])
                #expect(r.stdout.hasPrefix("HTTP/2 502"), "\(path): \(r.stdout)")
            }
            for proto in ["--http2-prior-knowledge", "--http1.1"] {
                let r = try await Run.tool("curl", ["-sS", proto, "-D", "-", "\(h.base)/odd-fields"])
                let head = r.stdout.lowercased()
                #expect(head.contains(" 200") && r.stdout.hasSuffix("ok"), "\(r.stdout)")
                #expect(!head.contains("x_assertgate_user") && !head.contains("x-assertgate_trust"), "\(r.stdout)")
                #expect(!head.contains("\nte:"), "\(r.stdout)")
            }
            // A 103 is passed on before the answer, without trust fields.
            for proto in ["--http2-prior-knowledge", "--http1.1"] {
                let r = try await Run.tool("curl", ["-sS", proto, "-D", "-", "\(h.base)/early-hints"])
                let text = r.stdout.lowercased()
                #expect(text.contains(" 103") && text.contains("link: </a.css>; rel=preload"), "\(r.stdout)")
                #expect(!text.contains("forged") && r.stdout.hasSuffix("ok"), "\(r.stdout)")
            }
            let before = try await Self.stats(up).connections
            let big = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-D", "-", "\(h.base)/big-head"])
            #expect(big.stdout.hasPrefix("HTTP/2 502"), "\(big.stdout)")
            let after = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(h.base)/ok"])
            #expect(after.stdout == "ok")
            // (`stats` itself is a connection of its own, straight to the upstream.)
            #expect(try await Self.stats(up).connections == before + 1, "the upstream connection was closed")
            try await h.stop()
        }

        /// `/readyz`'s exhausted-pool signal on an HTTP/2 upstream: one
        /// connection of one stream, held by a request whose route waits 30 s
        /// (`routes[].limits`); another client's request waits the upstream's
        /// 300 ms for a slot, and the pool is reported until the stream ends.
        @Test func anExhaustedHTTP2PoolIsReportedUntilAStreamEnds() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Harness.start(
                upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port, scheme: .h2c)],
                responseTimeout: .milliseconds(300), threads: 1
            ) {
                $0.upstreams["legacy"]?.maxConnectionsPerEndpoint = 1
                $0.upstreams["legacy"]?.maxStreamsPerConnection = 1
                var hang = RouteConfig(match: RouteMatch(kind: .exact("/hang")), upstream: "legacy", mode: .passthrough)
                hang.limits.responseTimeout = .seconds(30)
                $0.routes.insert(hang, at: 0)
            }
            // curl gives up after 12 s, which resets the stream and frees the
            // slot. (At 4 s, a slow CI machine's start-up had used it all up:
            // the slot was free again before the second request came.)
            let holder = Task {
                try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "--interface", "127.0.0.1", "-m", "12", "\(h.base)/hang"])
            }
            #expect(try await Self.waitForStats(up) { $0.hangs == 1 }.hangs == 1)
            #expect(h.gateway.upstreamHealth.exhaustedUpstreams.isEmpty)
            let r = try await Run.tool(
                "curl", ["-sS", "--http2-prior-knowledge", "--interface", "127.0.0.3", "-o", "/dev/null", "-w", "%{http_code}",
                         "-m", "10", "\(h.base)/ok"])
            #expect(r.stdout == "504", "\(r.stdout) \(r.stderr)")
            #expect(try await Integration.HardeningTests.eventually(within: 3) { !h.gateway.upstreamHealth.exhaustedUpstreams.isEmpty })
            #expect(h.gateway.upstreamHealth.exhaustedUpstreams.first?.hasPrefix("legacy (h2c://127.0.0.1:") == true,
                    "\(h.gateway.upstreamHealth.exhaustedUpstreams)")
            _ = try await holder.value
            #expect(try await Integration.HardeningTests.eventually(within: 5) { h.gateway.upstreamHealth.exhaustedUpstreams.isEmpty })
            // The slot serves again.
            let after = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(h.base)/ok"])
            #expect(after.stdout == "ok")
            try await h.stop()
        }

        /// An upstream that answers (END_STREAM) before the request body is
        /// in, and sends no RST_STREAM: the gateway resets the stream, so it
        /// does not stay half open for ever holding its slot (here the only one).
        @Test func anAnswerBeforeTheWholeBodyResetsTheStreamAndFreesItsSlot() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Harness.start(
                upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port, scheme: .h2c)],
                responseTimeout: .seconds(2), threads: 1
            ) {
                $0.upstreams["legacy"]?.maxConnectionsPerEndpoint = 1
                $0.upstreams["legacy"]?.maxStreamsPerConnection = 1
            }
            let body = FileManager.default.temporaryDirectory.appendingPathComponent("early-\(UUID().uuidString).bin")
            try Data(repeating: 0x61, count: 1 << 20).write(to: body)
            defer { try? FileManager.default.removeItem(at: body) }
            let early = try await Run.tool(
                "curl", ["-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-m", "10",
                         "--data-binary", "@\(body.path)", "\(h.base)/early"])
            #expect(early.stdout == "401", "\(early.stdout) \(early.stderr)")
            #expect(try await Self.waitForStats(up) { $0.resets >= 1 }.resets >= 1)
            let next = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-m", "10", "\(h.base)/ok"])
            #expect(next.stdout == "ok", "\(next.stdout) \(next.stderr)")
            try await h.stop()
        }

        @Test func aStreamRefusedByGoAwayIsSentAgainOnANewConnection() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            // A first request opens the connection; the second is refused by GOAWAY.
            let warm = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(h.base)/ok"])
            #expect(warm.stdout == "ok")
            let r = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-w", " %{http_code}", "\(h.base)/refuse-once"])
            #expect(r.stdout == "second 200", "\(r.stdout) \(r.stderr)")
            #expect(try await Self.stats(up).connections == 3)  // the gateway's two, and this /stats
            try await h.stop()
        }

        /// A streamed body is kept (64 KiB at most) until the response starts:
        /// a small one is sent again whole; a larger one cannot be, and the
        /// refusal is answered.
        @Test func aRefusedStreamedBodyIsSentAgainOnlyWhenKeptWhole() async throws {
            for size in [1000, 100_000] {
                let up = try Self.upstream()
                defer { up.stop() }
                let h = try await Self.gateway(up)
                let warm = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(h.base)/ok"])
                #expect(warm.stdout == "ok")
                let body = FileManager.default.temporaryDirectory.appendingPathComponent("refused-\(size).bin")
                try Data(repeating: 0x61, count: size).write(to: body)
                defer { try? FileManager.default.removeItem(at: body) }
                let r = try await Run.tool(
                    "curl", ["-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@\(body.path)",
                             "\(h.base)/refuse-once"])
                if size == 1000 {
                    #expect(r.stdout == "200", "\(size): \(r.stdout) \(r.stderr)")
                } else {
                    #expect(r.stdout == "502", "\(size): \(r.stdout) \(r.stderr)")
                }
                try await h.stop()
            }
        }

        @Test func aClientThatLeavesCancelsItsUpstreamStream() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            let r = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-m", "1", "\(h.base)/hang"])
            #expect(r.status == 28)  // curl gave up
            let s = try await Self.waitForStats(up) { $0.resets >= 1 }
            #expect(s.resets == 1)
            try await h.stop()
        }

        @Test func grpcTimeoutCapsTheWaitAndTheAnswerIsAGRPCStatus() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)  // responseTimeout 10 s
            let started = Date()
            let r = try await Run.tool(
                "curl",
                ["-sS", "--http2-prior-knowledge", "-D", "-", "-H", "content-type: application/grpc", "-H", "te: trailers",
                 "-H", "grpc-timeout: 300m", "-d", "", "\(h.base)/hang"])
            let took = Date().timeIntervalSince(started)
            #expect(took < 5, "took \(took) s")
            #expect(r.stdout.contains("grpc-status: 4"), "\(r.stdout)")
            #expect(r.stdout.contains("assertgate-reason: upstream-timeout"))
            // The upstream stream was cancelled, not left hanging.
            #expect(try await Self.waitForStats(up) { $0.resets >= 1 }.resets == 1)
            try await h.stop()
        }

        @Test func aConnectionThatStopsAnsweringPINGIsClosedBeforeTheResponseTimeout() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up) {
                $0.upstreams["legacy"]?.responseTimeout = .seconds(4)
                $0.upstreams["legacy"]?.connectTimeout = .milliseconds(300)
            }
            let started = Date()
            let r = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-D", "-", "\(h.base)/freeze"])
            let took = Date().timeIntervalSince(started)
            // PING after 2 s of silence, no ACK within 300 ms: the connection is
            // given up, not waited on until the 4 s response timeout (504). A
            // bodiless GET is sent once more on a fresh connection, which
            // freezes too: 502 after two such rounds.
            #expect(r.stdout.contains(" 502"), "\(r.stdout)")
            #expect(took > 3.8 && took < 6.5, "took \(took) s")
            #expect(try await Self.stats(up).connections == 3)  // two frozen, and this one
            try await h.stop()
        }

        /// A server that died without a GOAWAY (the connection just closes,
        /// nothing of the response came): a bodiless GET is sent again on a
        /// new connection, as on a stale HTTP/1.1 connection; a POST is not.
        @Test func aLostConnectionIsReplayedOnlyForABodilessIdempotentRequest() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up)
            let get = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(h.base)/drop-once"])
            #expect(get.stdout == "second", "\(get.stdout) \(get.stderr)")
            try await h.stop()

            let up2 = try Self.upstream()
            defer { up2.stop() }
            let h2 = try await Self.gateway(up2)
            let post = try await Run.tool(
                "curl", ["-sS", "--http2-prior-knowledge", "-D", "-", "-d", "x", "\(h2.base)/drop-once"])
            #expect(post.stdout.contains(" 502"), "\(post.stdout)")
            try await h2.stop()
        }

        /// `maxConnectionsPerClient` counts streams on an HTTP/2 upstream: an
        /// address whose requests hang holds its share (half of the 4 slots)
        /// and no more, and another address's request goes straight through.
        @Test func oneClientAddressHoldsAtMostItsShareOfStreams() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up) {
                $0.upstreams["legacy"]?.maxConnectionsPerEndpoint = 1
                $0.upstreams["legacy"]?.maxStreamsPerConnection = 4
            }
            let base = h.base
            let hog = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 {
                        group.addTask {
                            // 8 s: held past a slow machine's start-up, given up
                            // before the upstream's 10 s response timeout.
                            _ = try await Run.tool(
                                "curl", ["-sS", "--http2-prior-knowledge", "--interface", "127.0.0.2", "-m", "8", "\(base)/hang"])
                        }
                    }
                    try await group.waitForAll()
                }
            }
            #expect(try await Self.waitForStats(up) { $0.maxConcurrent >= 2 }.maxConcurrent == 2)
            let started = Date()
            let ok = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "--interface", "127.0.0.1", "-m", "4", "\(base)/ok"])
            let waited = Date().timeIntervalSince(started)
            #expect(ok.stdout == "ok", "\(ok.stderr)")
            #expect(waited < 2, "waited \(waited) s behind another address's requests")
            // Two of the hog's streams and this one; never a third of the hog's.
            #expect(try await Self.stats(up).maxConcurrent == 3)
            try await hog.value
            try await h.stop()
        }

        @Test func streamsShareFewConnections() async throws {
            let up = try Self.upstream()
            defer { up.stop() }
            let h = try await Self.gateway(up) { $0.upstreams["legacy"]?.maxStreamsPerConnection = 50 }
            let r = try await Run.tool("h2load", ["-n", "1000", "-c", "4", "-m", "25", "\(h.base)/slow"], timeout: 120)
            #expect(r.stdout.contains("1000 succeeded, 0 failed"), "\(r.stdout)")
            let s = try await Self.stats(up)
            // 100 requests in flight, each answered after 50 ms, at most 50
            // streams per connection: two connections, full (and this /stats).
            #expect(s.connections == 3)
            #expect(s.maxConcurrent == 50)
            try await h.stop()
        }
    }
}
