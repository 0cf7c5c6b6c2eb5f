import AssertGateTestSupport
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import Verifier
@testable import AssertGateCore

/// 32 bytes whose standard base64 has '+', '/' and '=' so both encodings differ.
private let keyBytes: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0xFB &+ $0 &* 7) }
private let keyIdURL = Base64.encodeURL(keyBytes)
private let keyIdStd = Data(keyBytes).base64EncodedString()

private final class FakeActions: AdminActions {
    let records = Mutex<[String: KeyRecord]>([:])
    let reloadResult: Result<Void, AdminReloadError>
    let reloads = Atomic<Int>(0)

    init(reloadResult: Result<Void, AdminReloadError> = .success(())) {
        self.reloadResult = reloadResult
        records.withLock {
            $0[keyIdURL] = KeyRecord(
                keyId: keyBytes, appId: "ABCDE12345.com.example.app", environment: .production, counter: 7,
                publicKey: [0x04, 0xF9], userId: "user 1", createdAt: 1_795_299_476, revoked: false, riskMetric: nil,
                riskMetricAt: nil)
        }
    }

    func keyRecord(keyId: String) async throws -> KeyRecord? { records.withLock { $0[keyId] } }

    func revoke(keyId: String) async throws -> KeyRecord? {
        records.withLock { map in
            map[keyId]?.revoked = true
            return map[keyId]
        }
    }

    func reload() async -> Result<Void, AdminReloadError> {
        reloads.wrappingAdd(1, ordering: .relaxed)
        return reloadResult
    }
}

private func router(token: String? = "admin-token", ready: Bool = true, actions: (any AdminActions)? = FakeActions())
    -> AdminRouter
{
    let registry = MetricsRegistry()
    registry.counter("t_total", help: "t").labels().inc()
    return AdminRouter(
        token: token.map { Secret(source: .inline, value: $0) }, metrics: registry, readiness: { ready },
        actions: actions)
}

private func json(_ body: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]) ?? [:]
}

private func header(_ r: AdminResponse, _ name: String) -> String? {
    r.headers.first { $0.0.lowercased() == name.lowercased() }?.1
}

@Suite struct AdminRouterTests {
    @Test func healthReadyMetrics() async {
        let r = router()
        let health = await r.respond(to: AdminRequest(method: "GET", uri: "/healthz"))
        #expect(health.status == 200)
        #expect(RequestId.isValid(header(health, "X-Request-Id") ?? ""))
        let ready = await r.respond(to: AdminRequest(method: "GET", uri: "/readyz?verbose=1"))
        #expect(ready.status == 200)
        let metrics = await r.respond(to: AdminRequest(method: "GET", uri: "/metrics"))
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("t_total 1\n"))
        #expect(header(metrics, "Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
    }

    @Test func notReadyIsStoreUnavailableProblem() async {
        let response = await router(ready: false).respond(to: AdminRequest(method: "GET", uri: "/readyz", requestIdHeader: "req-1"))
        #expect(response.status == 503)
        #expect(header(response, "Content-Type") == "application/problem+json")
        #expect(header(response, "X-Request-Id") == "req-1")
        let body = json(response.body)
        #expect(body["type"] as? String == "urn:assertgate:problem:store-unavailable")
        #expect(body["reason"] as? String == "store-unavailable")
        #expect(body["status"] as? Int == 503)
        #expect(body["title"] as? String == ReasonToken.storeUnavailable.title)
        #expect(body["requestId"] as? String == "req-1")
    }

    @Test func hangingReadinessTimesOut() async {
        let r = AdminRouter(
            token: nil, metrics: MetricsRegistry(),
            readiness: {
                try? await Task.sleep(for: .seconds(30))
                return true
            }, actions: nil, readinessTimeout: .milliseconds(50))
        #expect(await r.respond(to: AdminRequest(method: "GET", uri: "/readyz")).status == 503)
    }

    @Test func keyRoutesNeedAToken() async {
        for r in [router(token: nil), router(actions: nil)] {
            for (method, uri) in [("GET", "/keys/\(keyIdURL)"), ("POST", "/keys/\(keyIdURL)/revoke"), ("POST", "/reload")] {
                let response = await r.respond(to: AdminRequest(method: method, uri: uri, authorization: "Bearer admin-token"))
                #expect(response.status == 404)
                #expect(json(response.body)["reason"] as? String == "no-route")
            }
        }
    }

    @Test(arguments: [nil, "Bearer", "Bearer wrong-token", "Bearer admin-tokeN", "Bearer admin-token-and-more", "Basic admin-token", "admin-token"])
    func wrongOrMissingTokenIsUnauthorized(authorization: String?) async {
        let response = await router().respond(to: AdminRequest(method: "GET", uri: "/keys/\(keyIdURL)", authorization: authorization))
        #expect(response.status == 401)
        #expect(json(response.body)["reason"] as? String == "unauthorized")
        #expect(header(response, "WWW-Authenticate") == "Bearer")
    }

    @Test func keyLookupBothEncodings() async throws {
        let r = router()
        let pct = keyIdStd.replacingOccurrences(of: "+", with: "%2B").replacingOccurrences(of: "/", with: "%2F")
            .replacingOccurrences(of: "=", with: "%3D")
        #expect(keyIdStd.contains("+") || keyIdStd.contains("/"))
        let lowerHex = pct.replacingOccurrences(of: "%2B", with: "%2b").replacingOccurrences(of: "%2F", with: "%2f")
            .replacingOccurrences(of: "%3D", with: "%3d")
        for id in [keyIdURL, pct, lowerHex, keyIdURL + "%3D"] {
            let response = await r.respond(to: AdminRequest(method: "GET", uri: "/keys/\(id)", authorization: "bearer admin-token"))
            #expect(response.status == 200)
            #expect(header(response, "Cache-Control") == "no-store")
            let body = json(response.body)
            #expect(body["keyId"] as? String == keyIdURL)
            #expect(body["counter"] as? Int == 7)
            #expect(body["createdAt"] as? String == "2026-11-21T22:17:56Z")
            #expect(body["revoked"] as? Bool == false)
            #expect(body["userId"] as? String == "user 1")
            #expect(body["riskMetric"] == nil)
        }
    }

    @Test func unknownAndMalformedKeys() async {
        let r = router()
        let other = Base64.encodeURL([UInt8](repeating: 1, count: 32))
        let unknown = await r.respond(to: AdminRequest(method: "GET", uri: "/keys/\(other)", authorization: "Bearer admin-token"))
        #expect(unknown.status == 404)
        #expect(json(unknown.body)["reason"] as? String == "unknown-key")
        #expect(json(unknown.body)["status"] as? Int == 404)
        for bad in ["abc", "%ZZ", "\(keyIdURL)AA", "!!!!"] {
            let response = await r.respond(to: AdminRequest(method: "GET", uri: "/keys/\(bad)", authorization: "Bearer admin-token"))
            #expect(response.status == 400, "\(bad)")
            #expect(json(response.body)["reason"] as? String == "malformed-request")
        }
    }

    @Test func revokeAndMethods() async {
        let r = router()
        let revoked = await r.respond(to: AdminRequest(method: "POST", uri: "/keys/\(keyIdURL)/revoke", authorization: "Bearer admin-token"))
        #expect(revoked.status == 200)
        #expect(json(revoked.body)["revoked"] as? Bool == true)
        let after = await r.respond(to: AdminRequest(method: "GET", uri: "/keys/\(keyIdURL)", authorization: "Bearer admin-token"))
        #expect(json(after.body)["revoked"] as? Bool == true)
        let wrong = await r.respond(to: AdminRequest(method: "GET", uri: "/keys/\(keyIdURL)/revoke", authorization: "Bearer admin-token"))
        #expect(wrong.status == 405)
        #expect(header(wrong, "Allow") == "POST")
        #expect(await r.respond(to: AdminRequest(method: "POST", uri: "/healthz")).status == 405)
    }

    @Test func reloadSuccessAndFailure() async {
        let good = FakeActions()
        let ok = await router(actions: good).respond(to: AdminRequest(method: "POST", uri: "/reload", authorization: "Bearer admin-token"))
        #expect(ok.status == 200)
        #expect(good.reloads.load(ordering: .relaxed) == 1)
        let bad = FakeActions(reloadResult: .failure(AdminReloadError(message: "config.yaml:3: unknown key 'x' at top level")))
        let failed = await router(actions: bad).respond(to: AdminRequest(method: "POST", uri: "/reload", authorization: "Bearer admin-token"))
        #expect(failed.status == 400)
        #expect(json(failed.body)["reason"] as? String == "config-invalid")
        #expect(json(failed.body)["detail"] as? String == "config.yaml:3: unknown key 'x' at top level")
        let get = await router(actions: good).respond(to: AdminRequest(method: "GET", uri: "/reload", authorization: "Bearer admin-token"))
        #expect(get.status == 405)
        #expect(good.reloads.load(ordering: .relaxed) == 1)
    }

    @Test func unknownPathsAndRequestIds() async {
        let r = router()
        for uri in ["/", "/nope", "/keys", "/keys/a/b", "/healthz/x", "//healthz"] {
            let response = await r.respond(to: AdminRequest(method: "GET", uri: uri, authorization: "Bearer admin-token", requestIdHeader: "bad id!"))
            #expect(response.status == 404, "\(uri)")
            #expect(json(response.body)["reason"] as? String == "no-route")
            let id = header(response, "X-Request-Id") ?? ""
            #expect(id != "bad id!" && id.count == 36)
            #expect(json(response.body)["requestId"] as? String == id)
        }
    }
}

/// The same endpoints over a real socket, driven by curl.
@Suite struct AdminServerTests {
    /// Awaited, never blocking: the admin listener answers through Swift
    /// concurrency, so a blocking wait here (on one of the cooperative pool's
    /// two threads, while another test holds the other) left it unable to
    /// answer until curl gave up. `swift test` in parallel showed it.
    static func curl(_ args: [String]) async throws -> (status: Int, headers: [String: String], body: String) {
        let result = try await Run.tool("curl", ["-sS", "-i", "--max-time", "10"] + args)
        guard result.status == 0 else {
            Issue.record("curl failed: \(result.stderr)")
            return (0, [:], "")
        }
        let parts = result.stdout.components(separatedBy: "\r\n\r\n")
        let headLines = parts[0].components(separatedBy: "\r\n")
        let status = Int(headLines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in headLines.dropFirst() {
            if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return (status, headers, parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    @Test func endpointsOverHTTP() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let metrics = GatewayMetrics()
        metrics.rejection(.badSignature).inc(3)
        let ready = Atomic<Bool>(true)
        let server = try await AdminServer.start(
            address: HostPort(host: "127.0.0.1", port: 0), token: Secret(source: .inline, value: "tok-123"),
            metrics: metrics.registry, readiness: { ready.load(ordering: .relaxed) }, actions: FakeActions(), group: group)
        #expect(server.port > 0)
        let base = "http://127.0.0.1:\(server.port)"

        let health = try await Self.curl(["-H", "X-Request-Id: my-req.1", "\(base)/healthz"])
        #expect(health.status == 200)
        #expect(health.headers["x-request-id"] == "my-req.1")

        #expect(try await Self.curl(["\(base)/readyz"]).status == 200)
        ready.store(false, ordering: .relaxed)
        let notReady = try await Self.curl(["\(base)/readyz"])
        #expect(notReady.status == 503)
        #expect(notReady.headers["content-type"] == "application/problem+json")
        #expect(json(notReady.body)["requestId"] as? String == notReady.headers["x-request-id"])

        let m = try await Self.curl(["\(base)/metrics"])
        #expect(m.status == 200)
        #expect(m.body.contains("assertgate_rejections_total{reason=\"bad-signature\"} 3\n"))

        let noToken = try await Self.curl(["\(base)/keys/\(keyIdURL)"])
        #expect(noToken.status == 401)
        #expect(try await Self.curl(["-H", "Authorization: Bearer nope", "\(base)/keys/\(keyIdURL)"]).status == 401)
        let key = try await Self.curl(["-H", "Authorization: Bearer tok-123", "\(base)/keys/\(keyIdURL)"])
        #expect(key.status == 200)
        #expect(json(key.body)["appId"] as? String == "ABCDE12345.com.example.app")
        let revoke = try await Self.curl(["-X", "POST", "-H", "Authorization: Bearer tok-123", "\(base)/keys/\(keyIdURL)/revoke"])
        #expect(revoke.status == 200)
        #expect(json(revoke.body)["revoked"] as? Bool == true)
        #expect(try await Self.curl(["-X", "POST", "-H", "Authorization: Bearer tok-123", "\(base)/reload"]).status == 200)
        let missing = try await Self.curl(["\(base)/missing"])
        #expect(missing.status == 404)
        #expect(json(missing.body)["type"] as? String == "urn:assertgate:problem:no-route")

        // Keep-alive: two requests on one connection both answered.
        let twice = try await Run.tool("curl", ["-sS", "--max-time", "10", "\(base)/healthz", "\(base)/healthz"])
        #expect(twice.stdout == #"{"status":"ok"}{"status":"ok"}"#)

        // HEAD answers headers only; an oversized body is refused and the connection closed.
        let head = try await Self.curl(["-I", "\(base)/healthz"])
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "15")
        #expect(head.body.isEmpty)
        let dir = try TempDir()
        defer { dir.remove() }
        let big = try dir.write("big", String(repeating: "x", count: 70_000))
        let tooLarge = try await Self.curl(["-X", "POST", "--data-binary", "@\(big)", "\(base)/reload"])
        #expect(tooLarge.status == 413)
        #expect(tooLarge.headers["connection"] == "close")
        #expect(json(tooLarge.body)["reason"] as? String == "body-too-large")

        // Bytes that are not HTTP/1.1 get a problem answer like any other admin error.
        for (args, status, reason) in [
            (["-X", "NOT-A-METHOD"], 400, "malformed-request"),
            (["-H", "X-Big: " + String(repeating: "h", count: 100_000)], 431, "headers-too-large"),
        ] {
            let bad = try await Self.curl(args + ["\(base)/healthz"])
            #expect(bad.status == status)
            #expect(bad.headers["content-type"] == "application/problem+json")
            #expect(bad.headers["connection"] == "close")
            #expect(json(bad.body)["reason"] as? String == reason)
            #expect(json(bad.body)["requestId"] as? String == bad.headers["x-request-id"])
        }
        #expect(try await Self.curl(["\(base)/healthz"]).status == 200)

        // A token replaced on reload takes effect.
        server.update(token: Secret(source: .inline, value: "tok-456"))
        #expect(try await Self.curl(["-H", "Authorization: Bearer tok-123", "\(base)/keys/\(keyIdURL)"]).status == 401)
        #expect(try await Self.curl(["-H", "Authorization: Bearer tok-456", "\(base)/keys/\(keyIdURL)"]).status == 200)

        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A raw-socket client (python3): `trickle` sends a head a byte every
    /// 200 ms and never finishes it; `hold N` opens N connections, then one
    /// more, and reports whether that one was closed at once, then closes one
    /// and asks for /healthz on a new connection. Prints one JSON object.
    private static let rawClient = """
        import json, socket, sys, time
        port, mode = int(sys.argv[1]), sys.argv[2]
        def conn():
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            return s
        if mode == "bigbody":
            s = conn(); s.sendall(b"POST /healthz HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 100000000\\r\\n\\r\\n")
            s.settimeout(5); answer = s.recv(4096)
            print(json.dumps({"status": answer[9:12].decode(), "close": b"connection: close" in answer.lower()}))
        elif mode in ("trickle", "tricklebody"):
            s = conn(); start = time.monotonic(); closed = False
            if mode == "trickle":
                data = b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\nX-Slow: " + b"a" * 200
            else:
                s.sendall(b"POST /healthz HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 1000\\r\\n\\r\\n"); data = b"b" * 200
            try:
                for b in data:
                    s.sendall(bytes([b])); time.sleep(0.2)
            except OSError:
                closed = True
            if not closed:
                s.settimeout(5)
                try: closed = s.recv(1) == b""
                except OSError: closed = True
            print(json.dumps({"closed": closed, "after": time.monotonic() - start}))
        else:
            n = int(sys.argv[3]); held = [conn() for _ in range(n)]
            for h in held:  # each accepted and kept: a request on it is answered
                h.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
                h.settimeout(5); h.recv(4096)
            extra = conn(); extra.settimeout(5)
            try: refused = extra.recv(1) == b""
            except (socket.timeout, OSError) as e: refused = not isinstance(e, socket.timeout)
            held.pop().close(); time.sleep(0.2)
            again = conn(); again.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
            again.settimeout(5); answer = again.recv(4096)
            print(json.dumps({"refused": refused, "answered": answer.startswith(b"HTTP/1.1 200")}))
        """

    private func server(_ limits: AdminServer.Limits) async throws -> (AdminServer, MultiThreadedEventLoopGroup) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await AdminServer.start(
            address: HostPort(host: "127.0.0.1", port: 0), token: nil, metrics: GatewayMetrics().registry,
            readiness: { true }, actions: nil, group: group, limits: limits)
        return (server, group)
    }

    private func rawJSON(_ args: [String]) async throws -> [String: Any] {
        let r = try await Run.tool("python3", ["-c", Self.rawClient] + args)
        let last = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any], "\(r.stdout) \(r.stderr)")
    }

    /// A head trickled a byte at a time keeps any idle clock going: it is
    /// closed once `headerTimeout` has passed since its first byte.
    @Test func aTrickledHeadIsClosedAfterTheHeaderTimeout() async throws {
        var limits = AdminServer.Limits()
        limits.headerTimeout = .seconds(1)
        let (server, group) = try await server(limits)
        let r = try await rawJSON([String(server.port), "trickle"])
        #expect(r["closed"] as? Bool == true, "\(r)")
        #expect((r["after"] as? Double ?? 99) < 5, "\(r)")
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A body trickled a byte at a time (each byte resets the idle clock) is
    /// cut like a trickled head; a body announced over the limit is refused
    /// at once, before a byte of it.
    @Test func aTrickledOrOversizedBodyDoesNotHoldAConnection() async throws {
        var limits = AdminServer.Limits()
        limits.headerTimeout = .seconds(1)
        let (server, group) = try await server(limits)
        let r = try await rawJSON([String(server.port), "tricklebody"])
        #expect(r["closed"] as? Bool == true, "\(r)")
        #expect((r["after"] as? Double ?? 99) < 5, "\(r)")
        let big = try await rawJSON([String(server.port), "bigbody"])
        #expect(big["status"] as? String == "413", "\(big)")
        #expect(big["close"] as? Bool == true, "\(big)")
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// One connection more than `maxConnections` is closed as it is accepted;
    /// once one closes, a new one is served.
    @Test func connectionsOverTheLimitAreClosed() async throws {
        var limits = AdminServer.Limits()
        limits.maxConnections = 4
        let (server, group) = try await server(limits)
        let r = try await rawJSON([String(server.port), "hold", "4"])
        #expect(r["refused"] as? Bool == true, "\(r)")
        #expect(r["answered"] as? Bool == true, "\(r)")
        try await server.close()
        try await group.shutdownGracefully()
    }

}
