import AssertGateTestSupport
import Foundation
import Testing

extension Integration {
    /// The issue #19 fixtures on their own, no gateway: grpcio's client
    /// against grpcio's server, nghttp and curl against nghttpd. If these
    /// fail, a failing `H2Upstream` test says nothing about the gateway.
    @Suite(.serialized) struct H2FixtureSmokeTests {
        @Test func grpcUnaryFailAndChatAgainstTheServerDirectly() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let say = try await GRPCClient.run(
                ["unary", "--target", server.target, "--text", "hi", "--seq", "3"]
                    + GRPCClient.metadata([("x-test-meta", "1")]), as: GRPCClient.Unary.self)
            #expect(say.code == "OK", "\(say)")
            #expect(say.reply?.text == "hi" && say.reply?.seq == 3)
            #expect(say.reply?.seenMetadata["x-test-meta"] == "1")
            #expect(say.trailingMetadata["x-test-trailer"] == "say")

            let fail = try await GRPCClient.run(
                ["unary", "--target", server.target, "--method", "Fail", "--text", "not ready"], as: GRPCClient.Unary.self)
            #expect(fail.codeNumber == 9 && fail.code == "FAILED_PRECONDITION", "\(fail)")
            #expect(fail.details == "not ready")
            #expect(fail.trailingMetadata["x-test-trailer"] == "yes")

            let chat = try await GRPCClient.run(
                ["chat", "--target", server.target, "--count", "1000", "--size", "512", "--window", "16"],
                as: GRPCClient.Chat.self)
            #expect(chat.code == "OK", "\(chat)")
            #expect(chat.received == 1000 && chat.inOrder)

            let stats = try await server.stats()
            #expect(stats.sayCalls == 1 && stats.failCalls == 1 && stats.chatMessages == 1000)
            // Three client processes, one connection each: what the
            // connection counting of the GOAWAY tests rests on.
            #expect(stats.peers.count == 3, "\(stats.peers)")
        }

        /// The server tells cancelled calls from completed ones, whether the
        /// client cancelled or its deadline passed, and can end a call itself.
        @Test func grpcCancelDeadlineAndServerResetAreObservable() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let cancel = try await GRPCClient.run(
                ["cancel", "--target", server.target, "--stats-target", server.target, "--text", "c1"],
                as: GRPCClient.Cancel.self)
            #expect(cancel.started && cancel.serverSawCancel && !cancel.serverCompleted, "\(cancel)")
            #expect(cancel.clientCode == "CANCELLED")

            let late = try await GRPCClient.run(
                ["unary", "--target", server.target, "--method", "Slow", "--text", "d1", "--seq", "20", "--timeout", "0.5"],
                as: GRPCClient.Unary.self)
            #expect(late.code == "DEADLINE_EXCEEDED" && late.codeNumber == 4, "\(late)")
            #expect(late.elapsedMs < 5000)
            let stats = try await server.waitForStats { $0.slowCancelled.contains("d1") }
            #expect(stats.slowCancelled.contains("d1") && !stats.slowCompleted.contains("d1"))

            let quick = try await GRPCClient.run(
                ["unary", "--target", server.target, "--method", "Slow", "--text", "q1", "--seq", "1"], as: GRPCClient.Unary.self)
            #expect(quick.code == "OK" && quick.reply?.seq == 1)
            #expect(try await server.stats().slowCompleted == ["q1"])

            let reset = try await GRPCClient.run(
                ["chat", "--target", server.target, "--count", "100", "--reset-at", "5", "--timeout", "20"],
                as: GRPCClient.Chat.self)
            #expect(reset.code == "CANCELLED", "\(reset)")
            #expect(reset.received == 5)
        }

        /// max_connection_age makes the server send GOAWAY: grpcio's client
        /// moves to new connections without a failed call.
        @Test func grpcServerGoawayRotatesConnectionsWithoutFailedCalls() async throws {
            let server = try GRPCServerFixture(maxConnectionAgeMs: 300)
            defer { server.stop() }
            let load = try await GRPCClient.run(
                ["load", "--target", server.target, "--seconds", "2", "--concurrency", "4"], as: GRPCClient.Load.self)
            #expect(load.failed == 0, "\(load)")
            #expect(load.ok > 50)
            #expect(try await server.stats().peers.count > 1)
        }

        @Test func grpcOverTLS() async throws {
            let pki = try await TestPKI.shared.value
            let server = try GRPCServerFixture(
                tls: .init(certificate: pki.serverCertificate, privateKey: pki.serverKey, caCertificate: pki.caCertificate))
            defer { server.stop() }
            let say = try await GRPCClient.run(
                ["unary", "--target", server.target, "--tls-ca", pki.caCertificate, "--server-name", "localhost", "--text", "tls"],
                as: GRPCClient.Unary.self)
            #expect(say.code == "OK", "\(say)")
            #expect(say.reply?.text == "tls")
            let untrusted = try await GRPCClient.run(
                ["unary", "--target", server.target, "--tls-ca", pki.otherCACertificate, "--server-name", "localhost",
                 "--timeout", "5"], as: GRPCClient.Unary.self)
            #expect(untrusted.code == "UNAVAILABLE", "\(untrusted)")
            // The fixture's own stats call speaks TLS to it too.
            #expect(try await server.stats().sayCalls == 1)
        }

        /// print-body is protobuf's encoding (field 1 length-delimited, field
        /// 2 varint), and the frame is gRPC's 5-byte prefix plus it.
        @Test func printBodyIsTheProtobufEncoding() async throws {
            let message = try await GRPCClient.message(text: "hi", seq: 3)
            #expect(message == [0x0A, 0x02, 0x68, 0x69, 0x10, 0x03])
            #expect(GRPCClient.frame(message) == [0, 0, 0, 0, 6, 0x0A, 0x02, 0x68, 0x69, 0x10, 0x03])
        }

        /// NghttpExchange reads a gRPC answer as the gateway tests need it:
        /// head, DATA, then trailers with grpc-status; and a trailers-only
        /// answer (Fail, no message) as one header block.
        @Test func nghttpSeesGRPCTrailersFromTheServerDirectly() async throws {
            let server = try GRPCServerFixture()
            defer { server.stop() }
            let frame = try await GRPCUpstreamTests.frameFile(text: "raw", seq: 1)
            defer { try? FileManager.default.removeItem(atPath: frame) }
            let base = "http://\(server.target)/assertgate.test.Echo/"
            let (say, r) = try await NghttpExchange.run(base + "Say", GRPCUpstreamTests.grpcRequestHeaders + ["-d", frame])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(say.status == 200 && say.header("content-type") == "application/grpc", "\(say.raw.suffix(2000))")
            #expect(say.dataBytes > 5 + 7)  // frame header + EchoReply(text "raw", seq 1, the metadata seen)
            #expect(say.trailer("grpc-status") == "0" && say.trailer("x-test-trailer") == "say", "\(say.trailers)")
            #expect(say.header("grpc-status") == nil)
            // seq 0: Fail's default status, 9.
            let failFrame = try await GRPCUpstreamTests.frameFile(text: "raw", seq: 0)
            defer { try? FileManager.default.removeItem(atPath: failFrame) }
            let (fail, _) = try await NghttpExchange.run(base + "Fail", GRPCUpstreamTests.grpcRequestHeaders + ["-d", failFrame])
            #expect(H2Upstream.grpcStatus(fail) == "9", "\(fail.raw.suffix(2000))")
            #expect(H2Upstream.grpcField(fail, "x-test-trailer") == "yes")
            #expect(fail.dataBytes == 0)
        }

        /// The parser on nghttp -v lines as nghttp 1.52 prints them: a
        /// never-indexed field ("sensitive"), trailers after DATA, a reset.
        @Test func nghttpOutputIsParsed() {
            let output = """
                [  0.002] recv (stream_id=13) :status: 200
                [  0.002] recv (stream_id=13) content-type: application/grpc
                [  0.002] recv (stream_id=13, sensitive) x-request-id: abc
                [  0.002] recv HEADERS frame <length=60, flags=0x04, stream_id=13>
                          ; END_HEADERS
                [  0.003] recv DATA frame <length=12, flags=0x00, stream_id=13>
                [  0.003] recv DATA frame <length=7, flags=0x00, stream_id=13>
                [  0.004] recv (stream_id=13) grpc-status: 0
                [  0.004] recv (stream_id=13) x-test-trailer: say
                [  0.004] recv HEADERS frame <length=30, flags=0x05, stream_id=13>
                [  0.005] recv RST_STREAM frame <length=4, flags=0x00, stream_id=13>
                          (error_code=CANCEL(0x08))
                """
            let e = NghttpExchange(parsing: output)
            #expect(e.status == 200)
            #expect(e.header("x-request-id") == "abc")
            #expect(e.header("grpc-status") == nil)
            #expect(e.trailer("grpc-status") == "0" && e.trailer("x-test-trailer") == "say")
            #expect(e.dataBytes == 19)
            #expect(e.resetCode == "CANCEL")
        }

        @Test func aMissingEnvironmentFailsWithHowToMakeIt() throws {
            do {
                _ = try GRPCFixtures.python(environment: ["ASSERTGATE_GRPC_PYTHON": "/nonexistent/python"])
                Issue.record("a missing interpreter was accepted")
            } catch {
                let text = String(describing: error)
                #expect(text.contains("Tests/Fixtures/grpc/setup.sh") && text.contains("/nonexistent/python"), "\(text)")
            }
        }

        @Test func nghttpdServesH2cWithTrailers() async throws {
            let nghttpd = try NghttpdFixture()
            defer { nghttpd.stop() }
            let (exchange, r) = try await NghttpExchange.run(nghttpd.baseURL + "/files/hello.txt")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(exchange.status == 200)
            #expect(exchange.dataBytes == 19)
            #expect(exchange.trailer("x-test-trailer") == "from-nghttpd", "\(exchange.trailers)")
            #expect(exchange.trailer("x-test-checksum") == "abc123")
            #expect(exchange.header("x-test-trailer") == nil)
            try await Self.expectDownload(nghttpd.baseURL + "/files/big.bin", equals: nghttpd.files["files/big.bin"], curl: [
                "--http2-prior-knowledge",
            ])
        }

        @Test func nghttpdServesTLSWithALPNh2() async throws {
            let pki = try await TestPKI.shared.value
            let nghttpd = try NghttpdFixture(tls: pki)
            defer { nghttpd.stop() }
            let (exchange, r) = try await NghttpExchange.run(nghttpd.baseURL + "/files/hello.txt")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(exchange.status == 200)
            #expect(exchange.trailer("x-test-trailer") == "from-nghttpd", "\(exchange.raw.suffix(1500))")
            try await Self.expectDownload(nghttpd.baseURL + "/files/big.bin", equals: nghttpd.files["files/big.bin"], curl: [
                "--http2", "--cacert", pki.caCertificate,
            ])
        }

        /// Downloads `url` with curl to a file and compares every byte; the
        /// protocol must have been HTTP/2.
        static func expectDownload(_ url: String, equals expected: [UInt8]?, curl options: [String]) async throws {
            let path = NSTemporaryDirectory() + "assertgate-download-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: path) }
            let r = try await Run.tool(
                "curl", ["-sS"] + options + ["-o", path, "-w", "%{http_code} %{http_version}", url])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout == "200 2", "\(r.stdout)")
            let got = try Data(contentsOf: URL(fileURLWithPath: path))
            // Compared outside #expect: on failure it would describe both
            // operands, a million array elements through reflection (minutes).
            let same = got == Data(expected ?? [])
            let expectedCount = expected?.count ?? -1
            #expect(got.count == expectedCount)
            #expect(same, "the downloaded bytes differ from the file")
        }
    }
}
