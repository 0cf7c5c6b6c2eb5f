import AssertGateTestSupport
import AssertGateCore
import Foundation
import GatewayTLS
import Testing

extension Integration {
    /// A TLS listener of the gateway itself (OpenSSL handler in front of the
    /// protocol detector, ALPN h2 / http/1.1) with real curl.
    @Suite(.serialized) struct TLSGatewayTests {
        /// A self-signed P-256 certificate for 127.0.0.1 as `dir`/tls.crt and tls.key.
        static func makeCertificate(in dir: String, cn: String) async throws {
            let made = try await Run.tool(
                "openssl",
                ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                 "-subj", "/CN=\(cn)", "-addext", "subjectAltName=IP:127.0.0.1",
                 "-keyout", dir + "/tls.key", "-out", dir + "/tls.crt"])
            #expect(made.status == 0, "\(made.stderr)")
        }

        /// A gateway with one TLS listener (a fresh self-signed certificate),
        /// `adjust`ed, and a Python client's TLS opening that offers ALPN
        /// `sys.argv[2]` to port `sys.argv[1]` (`ctx`, then `s`); `body`
        /// gets both. The certificate's directory goes when it returns.
        static func withTLSGateway(
            _ adjust: (inout ListenerConfig) -> Void, _ body: (Harness, _ clientOpening: String) async throws -> Void
        ) async throws {
            let dir = NSTemporaryDirectory() + "assertgate-tls-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try await makeCertificate(in: dir, cn: "127.0.0.1")
            let h = try await Harness.start { config in
                var listener = ListenerConfig(
                    address: HostPort(host: "127.0.0.1", port: 0),
                    tls: TLSConfig(certificate: dir + "/tls.crt", privateKey: dir + "/tls.key"))
                adjust(&listener)
                config.listeners = [listener]
            }
            let opening = """
                import json, socket, ssl, sys, time
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                ctx.set_alpn_protocols([sys.argv[2]])
                # Python treats a bare EOF as a clean close unless told not to.
                ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
                s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))), suppress_ragged_eofs=False)

                """
            try await body(h, opening)
            try await h.stop()
        }

        @Test func curlOverTLSWithALPNh2AndHTTP11() async throws {
            try await Self.withTLSGateway({ _ in }) { h, _ in
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
            }
        }

        /// TLS 1.2 suites are ECDHE with an AEAD only: RFC 9113 §9.2.2 forbids
        /// the rest under HTTP/2 (static RSA, CBC), which ALPN picked before.
        @Test func tls12OffersOnlySuitesHTTP2Allows() async throws {
            try await Self.withTLSGateway({ _ in }) { h, _ in
                func handshake(_ cipher: String) async throws -> ProcessResult {
                    try await Run.tool("openssl", [
                        "s_client", "-connect", "127.0.0.1:\(h.port)", "-tls1_2", "-cipher", cipher, "-alpn", "h2",
                    ], timeout: 10)
                }
                for refused in ["AES128-SHA", "AES128-GCM-SHA256", "AES256-SHA256", "ECDHE-RSA-AES128-SHA"] {
                    let r = try await handshake(refused)
                    #expect(r.status != 0 && !r.stdout.contains("ALPN protocol: h2"), "\(refused): \(r.stdout)")
                }
                let ok = try await handshake("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256")
                #expect(ok.status == 0 && ok.stdout.contains("ALPN protocol: h2"), "\(ok.stdout) \(ok.stderr)")
            }
        }

        /// A client that completes the TLS handshake, ALPN included, and then
        /// says nothing is closed at `handshakeTimeout` (1 s), not held for
        /// `idleTimeout` (20 s): a connection is established by its
        /// protocol's first words (HTTP/2's SETTINGS, an HTTP/1.1 request
        /// byte), not by ALPN.
        @Test(arguments: ["h2", "http/1.1"])
        func aSilentClientAfterTheHandshakeIsClosedAtTheHandshakeTimeout(_ alpn: String) async throws {
            try await Self.withTLSGateway({
                $0.handshakeTimeout = .seconds(1)
                $0.idleTimeout = .seconds(20)
            }) { h, opening in
                let client = opening + """
                    start = time.monotonic()
                    chosen = s.selected_alpn_protocol()
                    s.settimeout(15)
                    try:
                        while s.recv(4096):
                            pass
                    except (ConnectionResetError, ssl.SSLError, socket.timeout):
                        pass
                    print(json.dumps({"alpn": chosen, "closedAfter": time.monotonic() - start}))
                    """
                let r = try await Run.tool("/usr/bin/python3", ["-c", client, String(h.port), alpn], timeout: 30)
                #expect(r.status == 0, "\(r.stderr)")
                let o = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
                #expect(o?["alpn"] as? String == alpn, "\(r.stdout)")
                let closedAfter = o?["closedAfter"] as? Double ?? 99
                #expect(closedAfter < 5, "closed after \(closedAfter) s")
            }
        }

        /// The client's Finished and its first HTTP/1.1 request in one
        /// socket read (TLS 1.3 clients send them together): the request
        /// establishes the connection, so an answer slower than
        /// `handshakeTimeout` (1 s here; the upstream takes 2.5 s) still
        /// arrives. It was cut at the handshake deadline: the request had
        /// come in the read that ended the handshake, before the front end
        /// was told to wait for it.
        @Test func aRequestSentWithTheFinishedOutlivesTheHandshakeTimeout() async throws {
            try await Self.withTLSGateway({
                $0.handshakeTimeout = .seconds(1)
                $0.idleTimeout = .seconds(20)
            }) { h, _ in
                // The handshake by hand (MemoryBIO), holding the client's
                // Finished back until the request is written after it.
                let client = #"""
                    import json, socket, ssl, sys
                    ctx = ssl.create_default_context()
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                    ctx.set_alpn_protocols(["http/1.1"])
                    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
                    tls = ctx.wrap_bio(incoming, outgoing)
                    sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                    sock.settimeout(15)
                    while True:
                        try:
                            tls.do_handshake()
                            break
                        except ssl.SSLWantReadError:
                            pending = outgoing.read()
                            if pending:
                                sock.sendall(pending)
                            incoming.write(sock.recv(65536))
                    tls.write(b"GET /slow?ms=2500 HTTP/1.1\r\nHost: t\r\n\r\n")
                    sock.sendall(outgoing.read())  # Finished and the request: one segment
                    answer = b""
                    while b"slow" not in answer:
                        data = sock.recv(65536)
                        if not data:
                            break
                        incoming.write(data)
                        try:
                            while True:
                                answer += tls.read(65536)
                        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                            pass
                    print(json.dumps({"answered": answer.startswith(b"HTTP/1.1 200"), "slow": b"slow" in answer}))
                    """#
                let r = try await Run.tool("/usr/bin/python3", ["-c", client, String(h.port)], timeout: 30)
                #expect(r.status == 0, "\(r.stderr)")
                let o = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
                #expect(o?["answered"] as? Bool == true && o?["slow"] as? Bool == true, "\(r.stdout) \(r.stderr)")
            }
        }

        /// An idle connection is closed the way a shutdown closes it: over TLS
        /// with close_notify (a bare EOF would look like a cut), on HTTP/2
        /// after a GOAWAY naming the last stream served.
        @Test(arguments: ["h2", "http/1.1"])
        func anIdleConnectionIsClosedWithGoAwayAndCloseNotify(_ alpn: String) async throws {
            try await Self.withTLSGateway({ $0.idleTimeout = .seconds(1) }) { h, opening in
                let client = opening + """
                    s.settimeout(15)
                    if sys.argv[2] == "h2":
                        s.sendall(b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
                    else:
                        s.sendall(b"GET /hello HTTP/1.1\\r\\nHost: t\\r\\n\\r\\n")
                    data, end = b"", None
                    try:
                        while True:
                            chunk = s.recv(65536)
                            if not chunk:
                                end = "close_notify"
                                break
                            data += chunk
                    except ssl.SSLError as e:
                        end = "TLS error (a bare EOF?): %s" % e
                    except (ConnectionResetError, socket.timeout) as e:
                        end = type(e).__name__
                    goaway = None
                    if sys.argv[2] == "h2":
                        i = 0
                        while i + 9 <= len(data):
                            n = int.from_bytes(data[i:i + 3], "big")
                            if data[i + 3] == 7:
                                goaway = int.from_bytes(data[i + 13:i + 17], "big")
                            i += 9 + n
                    print(json.dumps({"end": end, "goaway": goaway, "answered": data.startswith(b"HTTP/1.1 200")}))
                    """
                let r = try await Run.tool("/usr/bin/python3", ["-c", client, String(h.port), alpn], timeout: 30)
                #expect(r.status == 0, "\(r.stderr)")
                let o = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
                #expect(o?["end"] as? String == "close_notify", "\(r.stdout)")
                if alpn == "h2" {
                    #expect(o?["goaway"] as? Int == 0, "\(r.stdout)")  // NO_ERROR
                } else {
                    #expect(o?["answered"] as? Bool == true, "\(r.stdout)")
                }
            }
        }

        /// A certificate renewed in place (certbot, cert-manager) is served to new
        /// connections after a reload; a file that does not load changes nothing.
        @Test func reloadReadsRenewedCertificates() async throws {
            let dir = NSTemporaryDirectory() + "assertgate-tls-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            func makeCertificate(cn: String) async throws { try await Self.makeCertificate(in: dir, cn: cn) }
            try await makeCertificate(cn: "first.example")
            let listener = ListenerConfig(
                address: HostPort(host: "127.0.0.1", port: 0),
                tls: TLSConfig(certificate: dir + "/tls.crt", privateKey: dir + "/tls.key"))
            let h = try await Harness.start { $0.listeners = [listener] }
            let url = "https://127.0.0.1:\(h.port)/hello"
            func servedSubject() async throws -> String {
                let r = try await Run.tool("curl", ["-sS", "-k", "-v", "-o", "/dev/null", url])
                #expect(r.status == 0, "\(r.stderr)")
                return r.stderr.split(separator: "\n").first { $0.contains("subject:") }.map(String.init) ?? ""
            }
            #expect(try await servedSubject().contains("CN=first.example"))

            try await makeCertificate(cn: "renewed.example")
            #expect(try await servedSubject().contains("CN=first.example"), "nothing changes before the reload")
            var config = h.gateway.config
            config.listeners = [listener]
            let result = try h.gateway.reloadListeners(from: config)
            #expect(result.reloaded == [listener.address])
            #expect(result.needRestart.isEmpty)
            #expect(try await servedSubject().contains("CN=renewed.example"))

            // A broken file: the reload throws, naming it, and the listener keeps its certificate.
            try "not a certificate".write(toFile: dir + "/tls.crt", atomically: true, encoding: .utf8)
            #expect(throws: TLSConfigurationError.self) { try h.gateway.reloadListeners(from: config) }
            #expect(try await servedSubject().contains("CN=renewed.example"))

            // Listener changes are reported, not applied.
            var moved = config
            moved.listeners = [ListenerConfig(address: HostPort(host: "127.0.0.1", port: 1), tls: nil)]
            try await makeCertificate(cn: "third.example")
            let changes = try h.gateway.reloadListeners(from: moved)
            #expect(changes.reloaded.isEmpty)
            #expect(changes.needRestart.count == 2, "\(changes.needRestart)")
            #expect(try await servedSubject().contains("CN=renewed.example"))
            // Two listeners on port 0 (cleartext and TLS) pair by position.
            var both = config
            both.listeners = [ListenerConfig(address: HostPort(host: "127.0.0.1", port: 0), tls: nil), listener]
            let h2 = try await Harness.start { $0.listeners = both.listeners }
            let pairs = try h2.gateway.reloadListeners(from: both)
            #expect(pairs.reloaded == [listener.address])
            #expect(pairs.needRestart.isEmpty, "\(pairs.needRestart)")
            try await h2.stop()

            try await h.stop()
        }
    }
}
