import NIOHTTP1
import Testing

@testable import AssertGateCore

@Suite struct HeaderRewriterTests {
    private func snapshot(prefix: String = "X-AssertGate-") -> GatewaySnapshot {
        var c = GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [])
        c.trust.headerPrefix = prefix
        return GatewaySnapshot(config: c)
    }

    /// A GET for `/` with these fields, as a front end hands it over.
    private func request(
        _ client: HTTPHeaders, authority: String?, requestId: String = "r", clientAddress: String?, scheme: String
    ) -> ProxyRequest {
        ProxyRequest(
            method: "GET", target: "/", authority: authority, scheme: scheme, headers: client, requestId: requestId,
            clientAddress: clientAddress, snapshot: snapshot())
    }

    private func route(forwardAssertion: Bool = false) -> RouteConfig {
        var r = RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "u", mode: .passthrough)
        r.forwardAssertionHeaders = forwardAssertion
        return r
    }

    /// Requests (Strings, any case) and upstream responses (lower-case bytes)
    /// are classified by two functions; they must drop the same fields.
    @Test func bothHopByHopClassifiersAgree() {
        let names = [
            "te", "trailer", "upgrade", "connection", "keep-alive", "transfer-encoding", "proxy-", "proxy-authorization",
            "proxy-connection", "proxy-authenticate-extra-long-name", "content-length", "x-request-id", "tE",
            "Trailer", "UPGRADE", "Connection", "Keep-Alive", "Transfer-Encoding", "Proxy-Authorization",
            "PROXY-CONNECTION", "t", "tes", "trailers", "upgrades", "connections", "keep-alivex", "transfer-encodings",
            "proxy", "xproxy-a", "accept", "host", "content-type", "x-proxy-id", "", "te ", "te\u{0}",
        ]
        for name in names {
            let lowered = ArraySlice(name.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 })
            let dropsResponseField: Bool
            switch HopByHop.classify(lowered) {
            case .connection, .transferEncoding, .hopByHop: dropsResponseField = true
            case .contentLength, .requestId, .other: dropsResponseField = false
            }
            #expect(HeaderRewriter.isHopByHop(name) == dropsResponseField, "\(name)")
        }
    }

    @Test func trustPrefixIsStrippedInAnyCase() {
        var h = HTTPHeaders([
            ("X-AssertGate-Trust", "verified"), ("x-assertgate-user", "m"), ("X-ASSERTGATE-KEY-ID", "k"),
            ("x-AsSeRtGaTe-", "empty-suffix"), ("X-AssertGat", "not-prefixed"), ("Accept", "*/*"),
        ])
        #expect(HeaderRewriter.sanitizeClientHeaders(&h, snapshot: snapshot()))
        #expect(h.map(\.name) == ["X-AssertGat", "Accept"])
    }

    @Test func customPrefixIsHonoured() {
        var h = HTTPHeaders([("X-Corp-Trust", "verified"), ("X-AssertGate-Trust", "x")])
        #expect(HeaderRewriter.sanitizeClientHeaders(&h, snapshot: snapshot(prefix: "X-Corp-")))
        #expect(h.map(\.name) == ["X-AssertGate-Trust"])
    }

    @Test func upstreamHeadersForPassthrough() {
        let client = HTTPHeaders([
            ("Host", "api.example"), ("Connection", "keep-alive, X-Secret-Hop"), ("X-Secret-Hop", "1"),
            ("Keep-Alive", "timeout=5"), ("Proxy-Authorization", "Basic x"), ("Proxy-Connection", "close"),
            ("TE", "trailers"), ("Trailer", "x"), ("Transfer-Encoding", "chunked"), ("Upgrade", "websocket"),
            ("AssertGate-Key-Id", "k"), ("assertgate-assertion", "a"), ("AssertGate-Challenge", "c"),
            ("X-Forwarded-For", "10.0.0.1"), ("X-Forwarded-For", "10.0.0.2"), ("Forwarded", "for=10.0.0.1"),
            ("X-Forwarded-Proto", "https"), ("X-Request-Id", "bad id with spaces"), ("Accept", "*/*"), ("Expect", "100-continue"),
        ])
        let out = HeaderRewriter.upstreamRequestHeaders(
            // The intake makes a client's Host the request's authority.
            for: request(client, authority: "api.example", requestId: "rid-1", clientAddress: "2001:db8::1", scheme: "http"),
            route: route(), extra: [("X-AssertGate-Trust", "none")], bodyFraming: .chunked)
        let names = Set(out.map { $0.name.lowercased() })
        for gone in ["connection", "x-secret-hop", "keep-alive", "proxy-authorization", "proxy-connection", "te",
                     "trailer", "upgrade", "expect", "assertgate-key-id", "assertgate-assertion", "assertgate-challenge"] {
            #expect(!names.contains(gone), "\(gone) should be removed")
        }
        #expect(out["Host"] == ["api.example"])
        #expect(out["Transfer-Encoding"] == ["chunked"])
        #expect(out["X-Request-Id"] == ["rid-1"])
        #expect(out["X-Forwarded-For"] == ["10.0.0.1, 10.0.0.2, 2001:db8::1"])
        #expect(out["Forwarded"] == ["for=10.0.0.1, for=\"[2001:db8::1]\";proto=http"])
        #expect(out["X-Forwarded-Proto"] == ["http"])
        #expect(out["X-AssertGate-Trust"] == ["none"])
        #expect(out["Accept"] == ["*/*"])
    }

    @Test func assertionHeadersForwardedWhenTheRouteSaysSo() {
        let client = HTTPHeaders([("AssertGate-Key-Id", "k"), ("AssertGate-Assertion", "a")])
        let out = HeaderRewriter.upstreamRequestHeaders(
            for: request(client, authority: "h2.example", clientAddress: "127.0.0.1", scheme: "https"),
            route: route(forwardAssertion: true), extra: [], bodyFraming: .contentLength(5))
        #expect(out["AssertGate-Key-Id"] == ["k"])
        #expect(out["AssertGate-Assertion"] == ["a"])
        #expect(out["Host"] == ["h2.example"])
        #expect(out["Content-Length"] == ["5"])
        #expect(out["X-Forwarded-Proto"] == ["https"])
    }

    @Test func authorityReplacesHostAndEmptyPostGetsContentLengthZero() {
        let client = HTTPHeaders([("host", "spoofed"), ("content-length", "99")])
        let out = HeaderRewriter.upstreamRequestHeaders(
            for: request(client, authority: "real", clientAddress: nil, scheme: "http"), route: route(), extra: [],
            bodyFraming: .empty)
        #expect(out["Host"] == ["real"])
        #expect(out["Content-Length"] == ["0"])
    }

    @Test func requestIdValidation() {
        #expect(RequestId.isValid("abc-DEF_0.9~:x"))
        #expect(RequestId.isValid(String(repeating: "a", count: 128)))
        #expect(!RequestId.isValid(String(repeating: "a", count: 129)))
        #expect(!RequestId.isValid(""))
        #expect(!RequestId.isValid("has space"))
        #expect(!RequestId.isValid("quote\""))
        #expect(!RequestId.isValid("é"))
    }

    @Test func generatedRequestIdsAreDistinctUUIDv4() {
        var g = RequestIdGenerator()
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = g.make()
            let parts = id.split(separator: "-")
            #expect(parts.map(\.count) == [8, 4, 4, 4, 12])
            #expect(parts[2].first == "4")
            #expect("89ab".contains(parts[3].first ?? "z"))
            #expect(RequestId.isValid(id))
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }

    @Test func routeMatchingFirstMatchWinsWithMethods() {
        var c = GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [
            RouteConfig(match: RouteMatch(kind: .exact("/a"), methods: ["POST"]), upstream: "post-a", mode: .enforce),
            RouteConfig(match: RouteMatch(kind: .prefix("/a")), upstream: "prefix-a", mode: .monitor),
        ])
        c.limits.maxConcurrentStreams = 1
        let s = GatewaySnapshot(config: c)
        #expect(s.route(method: "POST", path: "/a")?.upstream == "post-a")
        #expect(s.route(method: "GET", path: "/a")?.upstream == "prefix-a")
        #expect(s.route(method: "GET", path: "/ab")?.upstream == "prefix-a")
        #expect(s.route(method: "GET", path: "/b") == nil)
    }
}
