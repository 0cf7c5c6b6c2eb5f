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
            await h.gateway.reload(try GatewaySnapshot.build(config: config, previous: h.gateway.snapshot))
            #expect(try await Self.get(h, "/x").status == 502)
            config.upstreams["legacy"]?.tls = Self.tls(ca: pki.caCertificate)
            await h.gateway.reload(try GatewaySnapshot.build(config: config, previous: h.gateway.snapshot))
            #expect(try await Self.get(h, "/x").status == 200)
            try await h.stop()
        }

        /// A reload that leaves an upstream's TLS settings and files as they
        /// were keeps its connections; a CA file replaced in place is read
        /// again, and connections verified with the old bytes are retired.
        @Test func aReloadKeepsConnectionsUnlessTheTLSFilesChanged() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            let ca = NSTemporaryDirectory() + "assertgate-upstream-ca-\(UUID().uuidString).pem"
            try FileManager.default.copyItem(atPath: pki.caCertificate, toPath: ca)
            defer { try? FileManager.default.removeItem(atPath: ca) }
            let h = try await Self.gateway(port: up.port, tls: Self.tls(ca: ca))
            let first = try await Self.get(h, "/x")
            #expect(first.status == 200)
            await h.gateway.reload(try GatewaySnapshot.build(config: h.gateway.config, previous: h.gateway.snapshot))
            let same = try await Self.get(h, "/x")
            #expect(same.status == 200)
            #expect(try Self.seen(same.body).connection == Self.seen(first.body).connection)
            try FileManager.default.removeItem(atPath: ca)
            try FileManager.default.copyItem(atPath: pki.otherCACertificate, toPath: ca)
            await h.gateway.reload(try GatewaySnapshot.build(config: h.gateway.config, previous: h.gateway.snapshot))
            #expect(try await Self.get(h, "/x").status == 502)
            try await h.stop()
        }

        /// Two upstreams at one address with different TLS settings keep
        /// their own connections: the one whose `serverName` the certificate
        /// does not carry is refused every time, however warm the other's
        /// connection is.
        @Test func upstreamsSharingAnAddressNeverShareConnections() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            let endpoint = UpstreamEndpoint(host: "127.0.0.1", port: up.port, tls: true)
            let h = try await Harness.start(upstreamEndpoints: [endpoint], threads: 1) { config in
                var right = UpstreamConfig(endpoints: [endpoint])
                right.tls = Self.tls(ca: pki.caCertificate, serverName: "localhost")
                var wrong = UpstreamConfig(endpoints: [endpoint])
                wrong.tls = Self.tls(ca: pki.caCertificate, serverName: "api.internal.example")
                config.upstreams = ["right": right, "wrong": wrong]
                config.routes = [
                    RouteConfig(match: RouteMatch(kind: .prefix("/right/")), upstream: "right", mode: .passthrough),
                    RouteConfig(match: RouteMatch(kind: .prefix("/wrong/")), upstream: "wrong", mode: .passthrough),
                ]
            }
            var connections: Set<Int> = []
            for i in 0..<3 {
                let right = try await Self.get(h, "/right/\(i)")
                #expect(right.status == 200, "\(right.body)")
                connections.insert(try Self.seen(right.body).connection)
                #expect(try await Self.get(h, "/wrong/\(i)").status == 502)
            }
            #expect(connections.count == 1)
            try await h.stop()
        }

        /// A body delimited by the close ends only with close_notify: a bare
        /// FIN (anyone on the path can send one) must not pass a truncated
        /// body on as complete.
        @Test func aCloseDelimitedBodyEndsOnlyWithCloseNotify() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            let h = try await Self.gateway(port: up.port, tls: Self.tls(ca: pki.caCertificate))
            let notified = try await Self.get(h, "/close-delimited?notify=1")
            #expect(notified.status == 200)
            #expect(notified.body.utf8.count == 100_000)
            let cut = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-o", "/dev/null", h.base + "/close-delimited"])
            #expect(cut.status != 0, "curl must see the stream reset, not a complete body")
            try await h.stop()
        }

        /// An upstream that stops reading cannot keep the gateway's socket:
        /// a close waits for close_notify to be written only so long.
        @Test func aConnectionToAnUpstreamThatStoppedReadingIsClosed() async throws {
            let pki = try await TestPKI.shared.value
            let up = try Self.upstream(pki)
            defer { up.stop() }
            let h = try await Self.gateway(port: up.port, tls: Self.tls(ca: pki.caCertificate))
            let body = NSTemporaryDirectory() + "assertgate-upload-\(UUID().uuidString)"
            #expect(FileManager.default.createFile(atPath: body, contents: Data(count: 64 << 20)))
            defer { try? FileManager.default.removeItem(atPath: body) }
            // The client gives up while the upload is stuck; the gateway then closes its upstream connection.
            let r = try await Run.tool(
                "curl", ["-sS", "--http2-prior-knowledge", "--max-time", "2", "-o", "/dev/null", "-T", body, "-X", "POST",
                         h.base + "/stall"])
            #expect(r.status != 0)
            let deadline = Date().addingTimeInterval(10)
            while Self.establishedConnections(toPort: up.port) > 0, Date() < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let closed = Self.establishedConnections(toPort: up.port) == 0
            #expect(closed, "the gateway still holds its socket to the upstream")
            // Stopping would wait on that socket too: fail, do not hang.
            guard closed else { return }
            try await h.stop()
        }

        /// ESTABLISHED TCP connections on this machine to 127.0.0.1:`port`
        /// (/proc/net/tcp: remote address 0100007F:PORT, state 01).
        static func establishedConnections(toPort port: Int) -> Int {
            guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return -1 }
            let remote = "0100007F:" + String(format: "%04X", port)
            return table.split(separator: "\n").dropFirst().filter { line in
                let f = line.split(separator: " ")
                return f.count > 3 && f[2] == remote && f[3] == "01"
            }.count
        }
    }
}
