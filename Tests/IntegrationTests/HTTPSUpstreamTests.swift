import AssertGateCore
import AssertGateTestSupport
import Foundation
import Testing

extension Integration {
    /// `https://` upstreams: the gateway verifies the upstream's certificate
    /// (CA and name), can show a client certificate, and never reuses a
    /// connection verified under settings a reload replaced. The upstream is
    /// Python's `ssl` + `http.server` (`Support/https_upstream.py`); the
    /// client is curl.
    @Suite(.serialized) struct HTTPSUpstreamTests {
        struct Seen: Decodable {
            let method: String
            let path: String
            let headers: [String: String]
            let clientCN: String?
            let connection: Int
        }

        static func upstream(_ pki: TestPKI, requireClientCertificate: Bool = false) throws -> PythonScriptServer {
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("Support/https_upstream.py").path
            var arguments = [pki.serverCertificate, pki.serverKey]
            if requireClientCertificate { arguments.append(pki.caCertificate) }
            return try PythonScriptServer(scriptPath: script, arguments: arguments)
        }

        /// A gateway (one worker) whose only upstream is `https://127.0.0.1:port` with `tls`.
        static func gateway(port: Int, tls: ClientTLSConfig?) async throws -> Harness {
            try await Harness.start(
                upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: port, tls: true)], threads: 1
            ) { $0.upstreams["legacy"]?.tls = tls }
        }

        /// One request through a gateway started for it.
        static func once(port: Int, tls: ClientTLSConfig?) async throws -> (status: Int, body: String) {
            let h = try await gateway(port: port, tls: tls)
            let answer = try await get(h, "/x")
            try await h.stop()
            return answer
        }

        static func tls(ca: String, serverName: String? = nil, client: (String, String)? = nil) -> ClientTLSConfig {
            ClientTLSConfig(caFile: ca, certificate: client?.0, privateKey: client?.1, serverName: serverName)
        }

        /// Status and body of one request through the gateway (HTTP/2, prior knowledge).
        static func get(_ h: Harness, _ path: String) async throws -> (status: Int, body: String) {
            let r = try await Run.tool(
                "curl", ["-sS", "--http2-prior-knowledge", "-o", "-", "-w", "\n%{http_code}", h.base + path])
            #expect(r.status == 0, "\(r.stderr)")
            let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
        }

        static func seen(_ body: String) throws -> Seen {
            try JSONDecoder().decode(Seen.self, from: Data(body.utf8))
        }

        @Test func requestsReachAVerifiedUpstreamOverTLSAndReuseTheConnection() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            let h = try await Self.gateway(port: up.port, tls: Self.tls(ca: pki.caCertificate))
            var connections: Set<Int> = []
            for i in 0..<3 {
                let (status, body) = try await Self.get(h, "/orders/\(i)?q=1")
                #expect(status == 200, "\(body)")
                let seen = try Self.seen(body)
                #expect(seen.path == "/orders/\(i)?q=1")
                #expect(seen.method == "GET")
                #expect(seen.headers["x-assertgate-trust"] == "none")
                #expect(seen.clientCN == nil)
                connections.insert(seen.connection)
            }
            // One worker, one request at a time: the TLS connection is kept alive.
            #expect(connections.count == 1)
            try await h.stop()
        }

        @Test func anUpstreamCertificateFromAnotherCAIsRefused() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            let (status, body) = try await Self.once(port: up.port, tls: Self.tls(ca: pki.otherCACertificate))
            #expect(status == 502)
            #expect(body.contains("\"reason\":\"upstream-unavailable\""), "\(body)")
        }

        @Test func anUpstreamCertificateForAnotherNameIsRefused() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            // Signed by the right CA, but for 127.0.0.1 and localhost only.
            let wrong = Self.tls(ca: pki.caCertificate, serverName: "api.internal.example")
            #expect(try await Self.once(port: up.port, tls: wrong).status == 502)
            let right = Self.tls(ca: pki.caCertificate, serverName: "localhost")
            #expect(try await Self.once(port: up.port, tls: right).status == 200)
        }

        @Test func anUpstreamThatRequiresAClientCertificateGetsTheConfiguredOne() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki, requireClientCertificate: true)
            defer { up.stop() }
            #expect(try await Self.once(port: up.port, tls: Self.tls(ca: pki.caCertificate)).status == 502)
            let (status, body) = try await Self.once(
                port: up.port, tls: Self.tls(ca: pki.caCertificate, client: (pki.clientCertificate, pki.clientKey)))
            #expect(status == 200, "\(body)")
            #expect(try Self.seen(body).clientCN == "assertgate")
        }

        /// A reload that replaces the CA must not let requests ride on a
        /// kept-alive connection the old CA verified.
        @Test func aReloadedCARetiresConnectionsTheOldOneVerified() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            let h = try await Self.gateway(port: up.port, tls: Self.tls(ca: pki.caCertificate))
            #expect(try await Self.get(h, "/x").status == 200)
            var config = h.gateway.config
            config.upstreams["legacy"]?.tls = Self.tls(ca: pki.otherCACertificate)
            await h.gateway.reload(config)
            #expect(try await Self.get(h, "/x").status == 502)
            config.upstreams["legacy"]?.tls = Self.tls(ca: pki.caCertificate)
            await h.gateway.reload(config)
            #expect(try await Self.get(h, "/x").status == 200)
            try await h.stop()
        }
    }
}
