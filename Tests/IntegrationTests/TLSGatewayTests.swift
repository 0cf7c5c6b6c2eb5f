import AssertGateTestSupport
import AssertGateCore
import Foundation
import Testing

extension Integration {
    /// A TLS listener of the gateway itself (OpenSSL handler in front of the
    /// protocol detector, ALPN h2 / http/1.1) with real curl.
    @Suite(.serialized) struct TLSGatewayTests {
        @Test func curlOverTLSWithALPNh2AndHTTP11() async throws {
            let dir = NSTemporaryDirectory() + "assertgate-tls-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let made = try await Run.tool(
                "openssl",
                ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                 "-keyout", dir + "/tls.key", "-out", dir + "/tls.crt"])
            #expect(made.status == 0, "\(made.stderr)")
            let h = try await Harness.start { config in
                config.listeners = [
                    ListenerConfig(
                        address: HostPort(host: "127.0.0.1", port: 0),
                        tls: TLSConfig(certificate: dir + "/tls.crt", privateKey: dir + "/tls.key"))
                ]
            }
            let url = "https://127.0.0.1:\(h.port)/hello"
            let h2 = try await Run.tool("curl", ["-sS", "-k", "--http2", "-D", "-", url])
            #expect(h2.status == 0, "\(h2.stderr)")
            #expect(h2.stdout.hasPrefix("HTTP/2 200"), "\(h2.stdout)")
            #expect(h2.stdout.hasSuffix(TestUpstream.hello))
            let h1 = try await Run.tool("curl", ["-sS", "-k", "--http1.1", "-D", "-", url])
            #expect(h1.stdout.hasPrefix("HTTP/1.1 200"), "\(h1.stdout) \(h1.stderr)")
            // The upstream learns the client used https.
            #expect(h.upstream.requests.last?.headers.first(name: "x-forwarded-proto") == "https")
            // A cleartext client on the TLS port gets no HTTP answer.
            let plain = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "--max-time", "5", "http://127.0.0.1:\(h.port)/hello"])
            #expect(plain.status != 0)
            try await h.stop()
        }
    }
}
