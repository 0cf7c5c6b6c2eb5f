import AssertGateTestSupport
import DeviceSim
import Foundation
import Testing

extension Integration {
    /// Issue #19: a gRPC service (grpcio's server) behind the gateway, called
    /// by grpcio's client, with real Redis and the YAML-configured gateway.
    /// The contract these are written against is in H2UpstreamSupport.swift.
    @Suite(.serialized) struct GRPCUpstreamTests {
        typealias Unary = GRPCClient.Unary

        static let sayPath = H2Upstream.echo + "Say"

        /// One unary call through the gateway.
        static func call(_ h: EnforcementHarness, _ arguments: [String], timeout: TimeInterval = 60) async throws -> Unary {
            try await GRPCClient.run(["unary", "--target", h.grpcTarget] + arguments, as: Unary.self, timeout: timeout)
        }

        // MARK: (b) a verified call

        /// The signed body is the gRPC request body (5-byte frame header and
        /// message); the service sees the gateway's trust headers and none of
        /// the assertion headers, and its reply and trailers come back.
        @Test func aVerifiedUnaryCallReachesTheServiceWithTrustHeaders() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)],
                routes: ["{match: {prefix: \(H2Upstream.echo)}, upstream: grpc, mode: enforce, bindBody: true}"])
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)

            let body = GRPCClient.frame(try await GRPCClient.message(text: "pay 5", seq: 7))
            let signed = try H2Upstream.assertion(h, device, method: "Say", body: body, counter: 1)
            let r = try await Self.call(h, ["--text", "pay 5", "--seq", "7"] + signed)
            #expect(r.code == "OK", "\(r)")
            #expect(r.reply?.text == "pay 5" && r.reply?.seq == 7)
            let seen = r.reply?.seenMetadata ?? [:]
            #expect(seen["x-assertgate-trust"] == "verified", "\(seen)")
            #expect(seen["x-assertgate-key-id"] == device.keyIdBase64URL)
            #expect(seen["x-assertgate-signature"] != nil)
            #expect(seen["assertgate-assertion"] == nil && seen["assertgate-key-id"] == nil, "\(seen)")
            #expect(r.trailingMetadata["x-test-trailer"] == "say")
            #expect(r.trailingMetadata["assertgate-reason"] == nil)

            // The same assertion again is a replay, refused before the service.
            let replay = try await Self.call(h, ["--text", "pay 5", "--seq", "7"] + signed)
            #expect(replay.codeNumber == 7, "\(replay)")
            #expect(replay.trailingMetadata["assertgate-reason"] == "counter-replay")
            #expect(try await server.stats().sayCalls == 1)
            try await h.stop()
        }

        /// `h2://`: the same call to a gRPC server behind TLS (ALPN h2),
        /// verified with `tls.caFile` and `tls.serverName`; an untrusted
        /// certificate is 14 UNAVAILABLE, `upstream-unavailable`.
        @Test func aUnaryCallReachesAGRPCServerOverTLS() async throws {
            let pki = try await TestPKI.shared.value
            let server = try GRPCServerFixture(
                tls: .init(certificate: pki.serverCertificate, privateKey: pki.serverKey, caCertificate: pki.caCertificate))
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [
                    H2Upstream.upstream("grpc", port: server.port, caFile: pki.caCertificate),
                    H2Upstream.upstream("untrusted", port: server.port, caFile: pki.otherCACertificate),
                ],
                routes: [
                    H2Upstream.route("Say", mode: "passthrough"),
                    H2Upstream.route("Fail", mode: "passthrough", upstream: "untrusted"),
                ])
            let r = try await Self.call(h, ["--text", "over tls"])
            #expect(r.code == "OK", "\(r)")
            #expect(r.reply?.text == "over tls")
            #expect(r.reply?.seenMetadata["x-assertgate-trust"] == "none")
            let refused = try await Self.call(h, ["--method", "Fail"])
            #expect(refused.codeNumber == 14, "\(refused)")
            #expect(refused.trailingMetadata["assertgate-reason"] == "upstream-unavailable")
            #expect(try await server.stats().failCalls == 0)
            try await h.stop()
        }

        // MARK: (c) refusals

        @Test func refusedAssertionsAreGRPCStatusesWithTheirReason() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)],
                routes: ["{match: {prefix: \(H2Upstream.echo)}, upstream: grpc, mode: enforce, bindBody: true}"])
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)

            let missing = try await Self.call(h, ["--text", "no assertion"])
            #expect(missing.codeNumber == 16 && missing.code == "UNAUTHENTICATED", "\(missing)")
            #expect(missing.trailingMetadata["assertgate-reason"] == "missing-assertion")
            #expect(!missing.details.isEmpty)

            // Signed over "pay 5", sent with "pay 500": the body hash differs.
            let signedBody = GRPCClient.frame(try await GRPCClient.message(text: "pay 5", seq: 1))
            let tampered = try await Self.call(
                h, ["--text", "pay 500", "--seq", "1"]
                    + H2Upstream.assertion(h, device, method: "Say", body: signedBody, counter: 1))
            #expect(tampered.codeNumber == 7 && tampered.code == "PERMISSION_DENIED", "\(tampered)")
            #expect(tampered.trailingMetadata["assertgate-reason"] == "bad-signature")

            // Signed for another method (path) of the same service.
            let body = GRPCClient.frame(try await GRPCClient.message(text: "x", seq: 0))
            let otherPath = try await Self.call(
                h, ["--text", "x"] + H2Upstream.assertion(h, device, method: "Fail", body: body, counter: 2))
            #expect(otherPath.trailingMetadata["assertgate-reason"] == "bad-signature", "\(otherPath)")

            // A head over limits.maxHeaderListBytes (64 KiB): refused before any
            // pipeline, and still the way gRPC reads a refusal.
            // (Ten fields of 8 KB: one field over 64 KiB ends the whole connection.)
            let big = (0..<10).flatMap { ["--metadata", "x-big-\($0)=" + String(repeating: "b", count: 8000)] }
            let huge = try await Self.call(h, ["--text", "x"] + big)
            #expect(huge.codeNumber == 8 && huge.code == "RESOURCE_EXHAUSTED", "\(huge)")
            #expect(huge.trailingMetadata["assertgate-reason"] == "headers-too-large", "\(huge)")

            let stats = try await server.stats()
            #expect(stats.sayCalls == 0, "a refused call reached the service")
            try await h.stop()
        }

        // MARK: (d) the service's own status and trailers

        @Test func theServicesStatusAndTrailersReachTheClient() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)],
                routes: [H2Upstream.route("Fail", mode: "passthrough"), H2Upstream.route("Say", mode: "passthrough")])
            let fail = try await Self.call(h, ["--method", "Fail", "--text", "not ready"])
            #expect(fail.codeNumber == 9 && fail.code == "FAILED_PRECONDITION", "\(fail)")
            #expect(fail.details == "not ready")
            #expect(fail.trailingMetadata["x-test-trailer"] == "yes")
            #expect(fail.trailingMetadata["assertgate-reason"] == nil)

            let other = try await Self.call(h, ["--method", "Fail", "--seq", "5", "--text", "gone"])
            #expect(other.codeNumber == 5 && other.details == "gone", "\(other)")

            // A successful call: head, message, then trailers with grpc-status 0.
            let say = try await Self.call(h, ["--text", "open"])
            #expect(say.code == "OK", "\(say)")
            #expect(say.trailingMetadata["x-test-trailer"] == "say")
            #expect(say.reply?.seenMetadata["x-assertgate-trust"] == "none")

            // The same seen by nghttp2's client: the trailers arrive after the DATA.
            let frame = try await Self.frameFile(text: "raw", seq: 1)
            defer { try? FileManager.default.removeItem(atPath: frame) }
            let (raw, r) = try await NghttpExchange.run(h.base + Self.sayPath, Self.grpcRequestHeaders + ["-d", frame])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(raw.status == 200)
            #expect(raw.header("content-type") == "application/grpc")
            #expect(raw.dataBytes > 5)
            #expect(raw.trailer("grpc-status") == "0", "\(raw.raw.suffix(2000))")
            #expect(raw.trailer("x-test-trailer") == "say")
            #expect(try await server.stats().failCalls == 2)
            try await h.stop()
        }

        // MARK: (e) a long bidirectional stream

        /// 10,000 messages of 4 KiB each way on a route that checks an
        /// assertion over `UNSIGNED-PAYLOAD` (bindBody: false). The client
        /// keeps at most 32 unanswered, so a gateway that held the request
        /// stream back would stall it rather than finish. Memory: the gateway
        /// runs in this process and the client and server are separate
        /// processes, so this process's peak RSS growth (VmHWM after
        /// clear_refs, as StreamingBodyTests measures) is the gateway's; 40 MiB
        /// pass each way, a gateway that kept them would grow by that much.
        @Test func aTenThousandMessageChatStreamsWithBoundedMemory() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)],
                routes: [H2Upstream.route("Chat", mode: "enforce", extra: ", bindBody: false")],
                // The request stream is 40 MiB: over the default 16 MiB cap
                // on any request body, which applies to streams too.
                extraTopLevel: "limits: {maxRequestBodyBytes: 256MiB}")
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let signed = try H2Upstream.assertion(h, device, method: "Chat", counter: 1)

            Memory.resetPeak()
            let before = Memory.rssKiB
            let chat = try await GRPCClient.run(
                ["chat", "--target", h.grpcTarget, "--count", "10000", "--size", "4096", "--window", "32", "--timeout", "120"]
                    + signed, as: GRPCClient.Chat.self, timeout: 180)
            let growth = Memory.peakKiB - before
            print("[grpc chat] 10,000 × 4 KiB each way in \(chat.elapsedMs) ms, peak RSS growth \(growth) KiB (before \(before) KiB)")
            #expect(chat.code == "OK", "\(chat)")
            #expect(chat.sent == 10_000 && chat.received == 10_000 && chat.inOrder)
            #expect(chat.seenMetadata["x-assertgate-trust"] == "verified", "\(chat.seenMetadata)")
            #expect(chat.seenMetadata["assertgate-assertion"] == nil && chat.seenMetadata["assertgate-key-id"] == nil)
            #expect(growth < StreamingBodyTests.maxGrowthKiB, "peak RSS grew by \(growth) KiB")
            #expect(try await server.stats().chatMessages == 10_000)

            // Without an assertion the stream never reaches the service.
            let refused = try await GRPCClient.run(
                ["chat", "--target", h.grpcTarget, "--count", "3", "--timeout", "20"], as: GRPCClient.Chat.self)
            #expect(refused.codeNumber == 16, "\(refused)")
            #expect(refused.trailingMetadata["assertgate-reason"] == "missing-assertion")
            #expect(try await server.stats().chatMessages == 10_000)
            try await h.stop()
        }

        /// A chat that goes quiet both ways for 2.5 s, on a gateway whose
        /// global limits allow 1 s of silence in a request body and its
        /// upstream 1 s in a response: it lives when its route has its own
        /// limits (`routes[].limits`), and is cut when it has none. The
        /// client's pause is the scenario under test, not a wait.
        @Test(arguments: [true, false])
        func aQuietChatLivesOnARouteWithItsOwnLimits(_ ownLimits: Bool) async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let limits = ownLimits ? ", limits: {requestBodyTimeout: 20s, minRequestBodyRate: 0, responseTimeout: 20s}" : ""
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port, responseTimeout: "1s")],
                routes: [H2Upstream.route("Chat", mode: "enforce", extra: ", bindBody: false" + limits)],
                extraTopLevel: "limits: {requestBodyTimeout: 1s}")
            let device = try h.newDevice()
            #expect(try await h.attest(device).status == 201)
            let signed = try H2Upstream.assertion(h, device, method: "Chat", counter: 1)
            let chat = try await GRPCClient.run(
                ["chat", "--target", h.grpcTarget, "--count", "6", "--pause-after", "3", "--pause-ms", "2500", "--timeout", "30"]
                    + signed, as: GRPCClient.Chat.self, timeout: 60)
            if ownLimits {
                #expect(chat.code == "OK", "\(chat)")
                #expect(chat.sent == 6 && chat.received == 6 && chat.inOrder, "\(chat)")
                #expect(chat.elapsedMs >= 2500, "the pause happened: \(chat.elapsedMs) ms")
                #expect(try await server.stats().chatMessages == 6)
            } else {
                #expect(chat.code != "OK", "\(chat)")
                #expect(chat.received == 4, "the replies before the pause came, none after: \(chat)")
            }
            try await h.stop()
        }

        // MARK: (f) GOAWAY and multiplexing

        /// The server ends every connection with GOAWAY after about 300 ms
        /// (in-flight calls get 10 s to finish): 3 s of calls from 8 threads
        /// must all succeed, on more connections than the gateway has workers
        /// (2), which it can only have opened after GOAWAYs.
        @Test func upstreamGoawayMidTrafficFailsNoCall() async throws {
            let server = try GRPCServerFixture(maxConnectionAgeMs: 300, graceMs: 10_000)
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)], routes: [H2Upstream.route("Say", mode: "passthrough")])
            let load = try await GRPCClient.run(
                ["load", "--target", h.grpcTarget, "--seconds", "3", "--concurrency", "8"], as: GRPCClient.Load.self, timeout: 120)
            #expect(load.failed == 0, "\(load.failedCodes) \(load.failedDetails)")
            #expect(load.ok > 100, "\(load)")
            let stats = try await server.stats()
            #expect(stats.sayCalls == load.ok)
            #expect(stats.peers.count > 2, "upstream connections: \(stats.peers)")
            try await h.stop()
        }

        /// A connection the server sent GOAWAY to (gRPC's
        /// `max_connection_age`) but that still carries a long call takes no
        /// new stream, and must not hold one of the endpoint's connections:
        /// with `maxConnectionsPerEndpoint: 1`, calls made meanwhile waited
        /// for the long call to end and ran out of time.
        @Test func aConnectionClosingAfterGoawayDoesNotBlockNewCalls() async throws {
            let server = try GRPCServerFixture(maxConnectionAgeMs: 300, graceMs: 30_000)
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port, extra: ", maxConnectionsPerEndpoint: 1")],
                routes: [H2Upstream.route("Say", mode: "passthrough"), H2Upstream.route("Slow", mode: "passthrough")],
                workers: 1)
            async let long = Self.call(h, ["--method", "Slow", "--text", "long", "--seq", "8", "--timeout", "20"])
            _ = try await server.waitForStats { $0.slowStarted.contains("long") }
            let load = try await GRPCClient.run(
                ["load", "--target", h.grpcTarget, "--seconds", "3", "--concurrency", "2", "--timeout", "2"],
                as: GRPCClient.Load.self, timeout: 120)
            #expect(load.failed == 0, "\(load.failedCodes) \(load.failedDetails)")
            #expect(load.ok > 20, "\(load)")
            let stats = try await server.stats()
            #expect(stats.peers.count > 1, "no GOAWAY while the long call ran: \(stats.peers)")
            #expect(try await long.code == "OK")
            try await h.stop()
        }

        /// 16 concurrent calls on one client connection share upstream
        /// connections (HTTP/2 streams) instead of taking one each.
        @Test func concurrentCallsAreMultiplexedUpstream() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)], routes: [H2Upstream.route("Say", mode: "passthrough")])
            let load = try await GRPCClient.run(
                ["load", "--target", h.grpcTarget, "--seconds", "2", "--concurrency", "16"], as: GRPCClient.Load.self, timeout: 120)
            #expect(load.failed == 0, "\(load.failedCodes) \(load.failedDetails)")
            #expect(load.ok > 100)
            // One client connection lands on one worker: one upstream
            // connection, two at most (a worker may open a second as the first
            // starts). An HTTP/1.1-style pool would need up to 16.
            let peers = try await server.stats().peers
            #expect(peers.count <= 2, "upstream connections: \(peers)")
            try await h.stop()
        }

        // MARK: (g) resets both ways

        /// The service ends a bidirectional call while the client is still
        /// sending (trailers with grpc-status 1, then RST_STREAM NO_ERROR for
        /// the request half): the client gets the service's status promptly,
        /// not an error of the gateway's, and the gateway serves on.
        @Test func aServiceThatEndsACallMidStreamIsHeard() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)],
                routes: [H2Upstream.route("Chat", mode: "passthrough"), H2Upstream.route("Say", mode: "passthrough")])
            let chat = try await GRPCClient.run(
                ["chat", "--target", h.grpcTarget, "--count", "1000", "--reset-at", "5", "--timeout", "30"],
                as: GRPCClient.Chat.self)
            #expect(chat.code == "CANCELLED", "\(chat)")
            #expect(chat.received == 5)
            #expect(chat.elapsedMs < 10_000)
            #expect(try await Self.call(h, ["--text", "after"]).code == "OK")
            try await h.stop()
        }

        /// The server closes its connection under a call it has not answered
        /// (max connection age 300 ms, grace 200 ms): the client hears
        /// UNAVAILABLE at once, not at its 20 s deadline.
        @Test func anUpstreamConnectionLostMidCallFailsTheCallPromptly() async throws {
            let server = try GRPCServerFixture(maxConnectionAgeMs: 300, graceMs: 200)
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)], routes: [H2Upstream.route("Slow", mode: "passthrough")])
            let r = try await Self.call(h, ["--method", "Slow", "--text", "cut", "--seq", "20", "--timeout", "20"])
            #expect(r.code == "UNAVAILABLE", "\(r)")
            #expect(r.elapsedMs < 5000, "\(r)")
            #expect(try await server.stats().slowStarted == ["cut"])
            try await h.stop()
        }

        /// A client that cancels a call it has running: the service sees
        /// the call cancelled (the gateway reset the upstream stream).
        @Test func aClientCancelReachesTheService() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port)], routes: [H2Upstream.route("Slow", mode: "passthrough")])
            let r = try await GRPCClient.run(
                ["cancel", "--target", h.grpcTarget, "--stats-target", server.target, "--text", "to-cancel"],
                as: GRPCClient.Cancel.self)
            #expect(r.started, "the call never reached the service")
            #expect(r.clientCode == "CANCELLED")
            #expect(r.serverSawCancel && !r.serverCompleted, "\(r)")
            #expect(r.msToServerCancel < 5000)
            try await h.stop()
        }

        // MARK: (h) deadlines

        /// A client deadline (1 s) far shorter than the route's
        /// responseTimeout (60 s): DEADLINE_EXCEEDED about then, and the
        /// service's call ends too instead of running on.
        @Test func aClientDeadlineEndsTheCallPromptly() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port, responseTimeout: "60s")],
                routes: [H2Upstream.route("Slow", mode: "passthrough")])
            let r = try await Self.call(h, ["--method", "Slow", "--text", "late", "--seq", "30", "--timeout", "1"])
            #expect(r.codeNumber == 4 && r.code == "DEADLINE_EXCEEDED", "\(r)")
            #expect(r.elapsedMs < 4000, "\(r)")
            let stats = try await server.waitForStats { $0.slowCancelled.contains("late") }
            #expect(stats.slowCancelled.contains("late") && !stats.slowCompleted.contains("late"))
            try await h.stop()
        }

        /// `grpc-timeout` caps the upstream's responseTimeout in the gateway
        /// itself. grpcio's client and server both enforce a deadline on their
        /// own, so this sends the header with nghttp (no deadline of its own)
        /// and freezes the server (SIGSTOP) before the call: only the
        /// gateway can answer, 4 DEADLINE_EXCEEDED `upstream-timeout`
        /// after about 3 s, not after the 60 s responseTimeout.
        @Test func grpcTimeoutCapsTheUpstreamResponseTimeout() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("grpc", port: server.port, responseTimeout: "60s")],
                routes: [H2Upstream.route("Say", mode: "passthrough"), H2Upstream.route("Slow", mode: "passthrough")])
            // A first call opens the pooled connection; then the service is
            // frozen before the timed call leaves, so only the gateway can
            // answer it (grpcio enforces the same deadline itself, and a
            // service that is still running would race the gateway to it).
            let warm = try await Self.call(h, ["--text", "warm"])
            #expect(warm.code == "OK", "\(warm)")
            let frame = try await Self.frameFile(text: "frozen", seq: 30)
            defer { try? FileManager.default.removeItem(atPath: frame) }
            server.pause()
            defer { server.resume() }
            let started = Date()
            let (exchange, r) = try await NghttpExchange.run(
                h.base + H2Upstream.echo + "Slow", Self.grpcRequestHeaders + ["-H", "grpc-timeout: 3S", "-d", frame],
                timeout: 90)
            let elapsed = Date().timeIntervalSince(started)
            server.resume()
            #expect(r.status == 0, "\(r.stderr)")
            #expect(exchange.status == 200, "\(exchange.raw.suffix(2000))")
            #expect(H2Upstream.grpcStatus(exchange) == "4", "\(exchange.raw.suffix(2000))")
            #expect(H2Upstream.grpcField(exchange, "assertgate-reason") == "upstream-timeout")
            #expect(elapsed >= 2.5 && elapsed < 15, "answered after \(elapsed) s")
            try await h.stop()
        }

        // MARK: helpers

        /// What a gRPC client sends besides `:method POST` (nghttp's `-d` sets it).
        static let grpcRequestHeaders = ["-H", "content-type: application/grpc", "-H", "te: trailers"]

        /// A file holding the gRPC request body for EchoRequest(text, seq),
        /// encoded by protobuf itself.
        static func frameFile(text: String, seq: Int) async throws -> String {
            let message = try await GRPCClient.message(text: text, seq: seq)
            let path = NSTemporaryDirectory() + "assertgate-grpc-frame-\(UUID().uuidString)"
            try Data(GRPCClient.frame(message)).write(to: URL(fileURLWithPath: path))
            return path
        }
    }
}
