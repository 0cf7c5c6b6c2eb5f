import GatewayTLS
import Foundation
import NIOCore
import NIOPosix
import Testing

/// End-to-end: a real NIOPosix server with `OpenSSLHandler`, real
/// clients (curl, openssl s_client) as subprocesses.
@Suite(.serialized) struct OpenSSLServerHandlerTests {
    private static let largeSize = 20 * 1024 * 1024

    private func makeContext(
        _ directory: TLSTestSupport.TemporaryDirectory,
        alpn: [String] = ALPN.defaultProtocols,
        keyType: TLSTestSupport.KeyType = .p256
    ) async throws -> TLSServerContext {
        let files = try await TLSTestSupport.makeCertificate(in: directory, keyType: keyType)
        return try TLSServerContext(certificatePath: files.certificate, privateKeyPath: files.key, alpn: alpn)
    }

    @Test func sClientNegotiatesH2AndExchangesData() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { EchoRecorder(events: events) }) { server in
            let input = directory.path("input.txt")
            try "ping\n".write(toFile: input, atomically: true, encoding: .utf8)
            let result = try await TLSTestSupport.run(
                "openssl", ["s_client", "-connect", "127.0.0.1:\(server.port)", "-alpn", "h2", "-servername", "localhost"], stdinFile: input)

            #expect(result.stdout.contains("ALPN protocol: h2"), "s_client output:\n\(result.stdout)\n\(result.stderr)")
            #expect(try await events.next("handshake") { if case .handshake = $0 { true } else { false } } == .handshake(alpn: "h2"))
            #expect(try await events.next("ping") { if case .received = $0 { true } else { false } } == .received("ping\n"))
            // s_client sends close_notify at end of input; the server must close.
            #expect(try await events.next("close") { $0 == .closed } == .closed)
            #expect(result.status == 0, "s_client failed: \(result.stderr)")
        }
    }

    @Test func curlHTTP11GetsResponseOverHTTP11ALPN() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { MiniHTTPResponder(events: events) }) { server in
            let result = try await TLSTestSupport.run(
                "curl", ["-sS", "-k", "--http1.1", "--max-time", "30", "-w", "\n%{http_version}", "https://127.0.0.1:\(server.port)/"])
            #expect(result.status == 0, "curl failed: \(result.stderr)")
            #expect(result.stdout == "hello\n1.1")
            #expect(try await events.next("handshake") { if case .handshake = $0 { true } else { false } } == .handshake(alpn: "http/1.1"))
        }
    }

    @Test(arguments: [
        (TLSTestSupport.KeyType.p256, "1.2"), (.p256, "1.3"), (.rsa2048, "1.2"), (.rsa2048, "1.3"),
    ])
    func curlOverEachKeyTypeAndTLSVersion(keyType: TLSTestSupport.KeyType, version: String) async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory, keyType: keyType)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { MiniHTTPResponder(events: events) }) { server in
            let result = try await TLSTestSupport.run(
                "curl", [
                    "-sS", "-k", "--http1.1", "--tlsv\(version)", "--tls-max", version, "--max-time", "30",
                    "-w", "\n%{http_version}", "https://127.0.0.1:\(server.port)/",
                ])
            #expect(result.status == 0, "curl failed: \(result.stderr)")
            #expect(result.stdout == "hello\n1.1")
            #expect(try await events.next("handshake") { if case .handshake = $0 { true } else { false } } == .handshake(alpn: "http/1.1"))
        }
    }

    @Test func clientLimitedToTLS11IsRefused() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { MiniHTTPResponder(events: events) }) { server in
            let result = try await TLSTestSupport.run(
                "curl", ["-sS", "-k", "--tlsv1.0", "--tls-max", "1.1", "--max-time", "30", "https://127.0.0.1:\(server.port)/"])
            #expect(result.status != 0)
            #expect(result.stdout.isEmpty)
            // The server's protocol_version alert reached the client before the close.
            #expect(result.stderr.contains("alert protocol version"), "curl said: \(result.stderr)")
            #expect(try await events.next("server-side close") { $0 == .closed } == .closed)
        }
    }

    @Test func curlHTTP2NegotiatesH2() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { MiniHTTPResponder(events: events) }) { server in
            // The responder only speaks HTTP/1.1, so curl's request fails after
            // the preface; what matters is ALPN and that the preface decrypts.
            _ = try await TLSTestSupport.run(
                "curl", ["-sS", "-k", "--http2", "--max-time", "30", "https://127.0.0.1:\(server.port)/"])
            #expect(try await events.next("handshake") { if case .handshake = $0 { true } else { false } } == .handshake(alpn: "h2"))
            #expect(try await events.next("preface") { $0 == .http2Preface } == .http2Preface)
        }
    }

    @Test func curlHTTP2FallsBackWhenServerOnlyOffersHTTP11() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory, alpn: ["http/1.1"])
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { MiniHTTPResponder(events: events) }) { server in
            let result = try await TLSTestSupport.run(
                "curl", ["-sS", "-k", "--http2", "--max-time", "30", "-w", "\n%{http_version}", "https://127.0.0.1:\(server.port)/"])
            #expect(result.status == 0, "curl failed: \(result.stderr)")
            #expect(result.stdout == "hello\n1.1")
            #expect(try await events.next("handshake") { if case .handshake = $0 { true } else { false } } == .handshake(alpn: "http/1.1"))
        }
    }

    @Test func largeDownloadIsByteExact() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory)
        let payload = TLSTestSupport.payload(count: Self.largeSize)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { MiniHTTPResponder(events: events, payload: payload) }) { server in
            let output = directory.path("download.bin")
            let result = try await TLSTestSupport.run(
                "curl", ["-sS", "-k", "--http1.1", "--max-time", "120", "-o", output, "https://127.0.0.1:\(server.port)/big"], timeout: 150)
            #expect(result.status == 0, "curl failed: \(result.stderr)")
            let received = try Data(contentsOf: URL(fileURLWithPath: output))
            var expected = TLSTestSupport.Checksum()
            expected.update(payload)
            var actual = TLSTestSupport.Checksum()
            actual.update(received)
            #expect(received.count == Self.largeSize)
            #expect(actual == expected, "checksum \(actual.hex) != \(expected.hex)")
            // The single 20 MiB write's promise completes once all ciphertext left.
            #expect(try await events.next("body written") { if case .bodyWritten = $0 { true } else { false } } == .bodyWritten(bytes: Self.largeSize))
        }
    }

    @Test(arguments: [false, true])
    func largeUploadIsByteExact(autoRead: Bool) async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory)
        let payload = TLSTestSupport.payload(count: Self.largeSize, seed: 42)
        let input = directory.path("upload.bin")
        try Data(payload).write(to: URL(fileURLWithPath: input))
        var expected = TLSTestSupport.Checksum()
        expected.update(payload)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, autoRead: autoRead, application: { MiniHTTPResponder(events: events, manualRead: !autoRead) }) { server in
            let result = try await TLSTestSupport.run(
                "curl", [
                    "-sS", "-k", "--http1.1", "--max-time", "120", "-H", "Expect:", "-H", "Content-Type: application/octet-stream",
                    "--data-binary", "@\(input)", "https://127.0.0.1:\(server.port)/upload",
                ], timeout: 150)
            #expect(result.status == 0, "curl failed: \(result.stderr)")
            #expect(result.stdout == "\(Self.largeSize) \(expected.hex)")
            #expect(
                try await events.next("upload") { if case .upload = $0 { true } else { false } }
                    == .upload(bytes: Self.largeSize, checksum: expected.hex))
        }
    }

    @Test(arguments: [
        Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
        TLSTestSupport.payload(count: 4096, seed: 7),
        // A TLS record header announcing a handshake of absurd length, then junk.
        [0x16, 0x03, 0x01, 0xFF, 0xFF] + TLSTestSupport.payload(count: 300, seed: 9),
    ])
    func garbageClosesConnectionAndServerKeepsServing(garbage: [UInt8]) async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let context = try await self.makeContext(directory)
        let events = ServerEvents()
        try await TLSTestServer.with(context: context, application: { MiniHTTPResponder(events: events) }) { server in
            let client = try await ClientBootstrap(group: server.group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(RawClientRecorder())
                    }
                }
                .connect(host: "127.0.0.1", port: server.port)
                .get()
            try await client.writeAndFlush(ByteBuffer(bytes: garbage)).get()
            // For the oversized-record case OpenSSL may wait for more bytes;
            // half-closing our side makes the server see the end either way.
            if garbage.first == 0x16 {
                try? await client.close(mode: .output).get()
            }
            try await TLSTestSupport.withDeadline(30, "server to close the garbage connection") {
                try await client.closeFuture.get()
            }
            #expect(try await events.next("server-side close") { $0 == .closed } == .closed)

            let result = try await TLSTestSupport.run(
                "curl", ["-sS", "-k", "--http1.1", "--max-time", "30", "https://127.0.0.1:\(server.port)/"])
            #expect(result.status == 0, "curl after garbage failed: \(result.stderr)")
            #expect(result.stdout == "hello")
        }
    }
}
