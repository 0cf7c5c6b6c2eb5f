import CNGHTTP2
import NIOCore
import NIOHTTP1
import Testing

@testable import AssertGateCore

/// The client side of `HTTP2Session` (h2 upstreams) against its server side,
/// on bytes alone: requests out, responses in, trailers both ways, GOAWAY and
/// PING, each half seeing what the other sent.
@Suite struct HTTP2ClientSessionTests {
    static let settings = HTTP2Session.Settings(
        maxConcurrentStreams: 100, maxHeaderListBytes: 16 << 10, streamResetBurst: 1000, streamResetPerSecond: 33)

    /// A connected pair and every event each side has seen.
    final class Pair {
        let client: HTTP2Session
        let server: HTTP2Session
        var clientEvents: [HTTP2Session.Event] = []
        var serverEvents: [HTTP2Session.Event] = []

        init() throws {
            client = try HTTP2Session.client(HTTP2ClientSessionTests.settings, allocator: ByteBufferAllocator())
            server = try HTTP2Session.server(HTTP2ClientSessionTests.settings, allocator: ByteBufferAllocator())
        }

        /// Moves bytes both ways until neither side has anything to send;
        /// `onServer` sees each server event as it arrives (to answer).
        func run(onServer: (HTTP2Session.Event) throws -> Void = { _ in }) throws {
            for _ in 0..<100 {
                var moved = false
                var out: ByteBuffer?
                var cev: [HTTP2Session.Event] = []
                while try client.drain(into: &out, events: &cev) {}
                clientEvents += cev
                if let bytes = out, bytes.readableBytes > 0 {
                    moved = true
                    var sev: [HTTP2Session.Event] = []
                    try server.feed(bytes, into: &sev)
                    serverEvents += sev
                    for e in sev { try onServer(e) }
                }
                out = nil
                var sev: [HTTP2Session.Event] = []
                while try server.drain(into: &out, events: &sev) {}
                serverEvents += sev
                if let bytes = out, bytes.readableBytes > 0 {
                    moved = true
                    var cev2: [HTTP2Session.Event] = []
                    try client.feed(bytes, into: &cev2)
                    clientEvents += cev2
                }
                if !moved { return }
            }
            Issue.record("the sessions never went quiet")
        }
    }

    /// "METHOD target" and "Name: value" lines, written as HeaderRewriter writes a head.
    static func head(_ text: String, trailers: Bool = false) -> UpstreamH2Head {
        var lines = text.split(separator: "\r\n").map(String.init)
        let requestLine = lines.removeFirst().split(separator: " ")
        var h = UpstreamH2Head(method: String(requestLine[0]), target: String(requestLine[1]), scheme: "http", trailers: trailers)
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            h.add(name: String(line[..<colon]), value: String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
        h.finish()
        return h
    }

    @Test func aRequestWithBodyAndTrailersGoesOutAndTheResponseWithTrailersComesBack() throws {
        let pair = try Pair()
        let body = QueuedSource(Array("ping".utf8), ended: false)
        let id = try pair.client.submitRequest(
            Self.head("POST /pkg.Svc/Say HTTP/1.1\r\nHost: svc.local\r\nContent-Type: application/grpc\r\n\r\n", trailers: true),
            body: body)
        pair.client.setTrailers(id, ["x-client-trailer": "1"])
        body.ended = true
        _ = pair.client.resume(id)
        let answer = QueuedSource(Array("pong".utf8), ended: true)
        try pair.run { event in
            if case .end(let sid) = event {
                try pair.server.submitResponse(sid, status: 200, headers: ["content-type": "application/grpc"], body: answer)
                pair.server.setTrailers(sid, ["grpc-status": "0", "grpc-message": "fine"])
            }
        }
        // The server saw the request as sent, TE: trailers included, and the client's trailers.
        var sawHead = false
        var serverBody = ""
        var serverTrailers: HTTPHeaders?
        for e in pair.serverEvents {
            switch e {
            case .head(_, let h, let endStream):
                sawHead = true
                #expect(h.method == "POST")
                #expect(h.path == "/pkg.Svc/Say")
                #expect(h.authority == "svc.local")
                #expect(h.fields.first(name: "te") == "trailers")
                #expect(h.fields.first(name: "content-type") == "application/grpc")
                #expect(!endStream)
            case .data(_, let b): serverBody += String(buffer: b)
            case .trailers(_, let t): serverTrailers = t
            default: break
            }
        }
        #expect(sawHead)
        #expect(serverBody == "ping")
        #expect(serverTrailers?.first(name: "x-client-trailer") == "1")
        // The client saw :status, the body, the trailers, then the end, in that order.
        var order: [String] = []
        for e in pair.clientEvents {
            switch e {
            case .response(let sid, let h, _):
                #expect(sid == id)
                #expect(h.status == 200)
                var fields: [String: String] = [:]
                h.forEachForwarded { n, v in fields[String(decoding: n, as: UTF8.self)] = String(decoding: v, as: UTF8.self) }
                #expect(fields == ["content-type": "application/grpc"])
                order.append("head")
            case .data(_, let b): order.append("data:\(String(buffer: b))")
            case .trailers(_, let t):
                #expect(t.first(name: "grpc-status") == "0")
                #expect(t.first(name: "grpc-message") == "fine")
                order.append("trailers")
            case .end: order.append("end")
            default: break
            }
        }
        #expect(order == ["head", "data:pong", "trailers", "end"])
    }

    @Test func theClientFreesEachStreamsStateOnceItCloses() throws {
        let pair = try Pair()
        weak var released: QueuedSource?
        for round in 0..<10 {
            var ids: [Int32] = []
            for i in 0..<5 {
                let body = QueuedSource(Array("x".utf8), ended: true)
                if i == 0 { released = body }
                ids.append(try pair.client.submitRequest(Self.head("POST /r\(round)-\(i) HTTP/1.1\r\nHost: svc.local\r\n\r\n"), body: body))
            }
            #expect(pair.client.openStreams == 5)
            try pair.run { event in
                if case .end(let sid) = event {
                    if sid % 4 == 1 {
                        pair.server.reset(sid, errorCode: NGHTTP2_CANCEL.rawValue)
                    } else {
                        try pair.server.submitResponse(sid, status: 200, headers: [:], body: nil)
                    }
                }
            }
            #expect(pair.client.openStreams == 0, "round \(round)")
            #expect(released == nil)
            var closes = 0
            for case .closed(let id, _) in pair.clientEvents where ids.contains(id) { closes += 1 }
            #expect(closes == 5)
        }
    }

    @Test func aBodilessRequestEndsWithItsHeaders() throws {
        let pair = try Pair()
        _ = try pair.client.submitRequest(Self.head("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"), body: nil)
        try pair.run()
        let heads = pair.serverEvents.compactMap { e -> Bool? in
            if case .head(_, _, let endStream) = e { return endStream }
            return nil
        }
        #expect(heads == [true])
    }

    @Test func goAwayAndPingReachTheClient() throws {
        let pair = try Pair()
        _ = try pair.client.submitRequest(Self.head("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"), body: nil)
        try pair.run()
        pair.client.ping()
        pair.server.goAway()
        try pair.run()
        #expect(pair.clientEvents.contains { if case .pingAcked = $0 { return true } else { return false } })
        let goAway = pair.clientEvents.compactMap { e -> Int32? in
            if case .goAwayReceived(let last, let code) = e, code == 0 { return last }
            return nil
        }
        #expect(goAway == [1])
    }

    @Test func theServersStreamLimitIsWhatTheClientCounts() throws {
        let pair = try Pair()
        try pair.run()
        #expect(pair.client.remoteMaxConcurrentStreams == 100)
    }

    @Test func aStreamAboveTheGoAwayIsClosedAsRefused() throws {
        let pair = try Pair()
        let first = try pair.client.submitRequest(Self.head("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"), body: nil)
        try pair.run()
        pair.server.goAway()  // last processed: stream 1
        // Sent before the client has read the GOAWAY: the server never processes it.
        let second = try pair.client.submitRequest(Self.head("GET /b HTTP/1.1\r\nHost: a\r\n\r\n"), body: nil)
        try pair.run()
        #expect(first == 1)
        let refused = pair.clientEvents.compactMap { e -> Int32? in
            if case .closed(let id, let code) = e, code == NGHTTP2_REFUSED_STREAM.rawValue { return id }
            return nil
        }
        #expect(refused == [second])
    }
}

/// The head `HeaderRewriter` writes for an HTTP/2 upstream.
@Suite struct UpstreamH2HeadTests {
    @Test func hostBecomesTheAuthorityPseudoHeadersComeFirstAndConnectionFieldsGo() {
        let head = HTTP2ClientSessionTests.head(
            "POST /p?q=1 HTTP/1.1\r\nX-Mixed-Case: v\r\nHost: api.example\r\nConnection: keep-alive\r\n"
                + "Transfer-Encoding: chunked\r\nTE: gzip\r\nKeep-Alive: 5\r\nUpgrade: h2c\r\nProxy-Connection: x\r\ncontent-length: 3\r\n",
            trailers: true)
        #expect(head.isValid)
        let fields = head.fields
        #expect(fields.map(\.0) == [":method", ":scheme", ":authority", ":path", "x-mixed-case", "content-length", "te"])
        #expect(fields.map(\.1) == ["POST", "http", "api.example", "/p?q=1", "v", "3", "trailers"])
    }

    @Test func noTEWithoutTheClientAskingForTrailers() {
        let head = HTTP2ClientSessionTests.head("GET / HTTP/1.1\r\nHost: h\r\nTE: trailers\r\n")
        #expect(!head.fields.contains { $0.0 == "te" })
    }

    @Test func aControlCharacterOrABadNameMakesTheHeadInvalid() {
        var bad = UpstreamH2Head(method: "GET", target: "/", scheme: "http", trailers: false)
        bad.add(name: "x-a", value: "line\nbreak")
        #expect(!bad.isValid)
        var badName = UpstreamH2Head(method: "GET", target: "/", scheme: "http", trailers: false)
        badName.add(name: "x a", value: "v")
        #expect(!badName.isValid)
        #expect(!UpstreamH2Head(method: "G T", target: "/", scheme: "http", trailers: false).isValid)
    }

    private static let snapshot = GatewaySnapshot(config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: []))
    /// Trust headers signed (`trust.signingSecret`): they carry `X-AssertGate-Signature`.
    private static let signingSnapshot: GatewaySnapshot = {
        var c = GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [])
        c.trust.signingSecret = Secret(source: .inline, value: "a test signing secret")
        return GatewaySnapshot(config: c)
    }()
    private static let route = RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "u", mode: .passthrough)

    private static func rewritten(
        _ client: HTTPHeaders, address: String = "10.1.2.3", scheme: String = "https", checked: Bool = false,
        forwarding: ForwardingCache? = nil, requestId: String = "rid",
        extra: [(name: String, value: String)] = [("X-AssertGate-Trust", "none")], snapshot: GatewaySnapshot = snapshot
    ) -> UpstreamH2Head? {
        // The authority as the intake takes it: from the client's `host`.
        var request = ProxyRequest(
            method: "GET", target: "/a", authority: client.first(name: "host"), scheme: scheme, headers: client,
            requestId: requestId, clientAddress: address, snapshot: snapshot)
        request.fieldsChecked = checked
        return HeaderRewriter.upstreamH2Head(
            for: request, route: route, extra: extra, bodyFraming: .none, upstreamScheme: "http", trailers: false,
            forwarding: forwarding)
    }

    /// An HTTP/2 client's fields (checked by nghttp2, names lower case) are
    /// copied without a second pass and give the head a rechecking copy gives;
    /// the authority (the intake's, from `host`) is `:authority`, and neither
    /// `host` nor connection fields are copied.
    @Test func checkedClientFieldsGiveTheSameHead() throws {
        let client = HTTPHeaders([
            ("accept", "*/*"), ("host", "api.example"), ("user-agent", "a client with a long name/1.0"),
            ("connection", "x"), ("x-empty", ""),
        ])
        let checked = try #require(Self.rewritten(client, checked: true))
        let plain = try #require(Self.rewritten(client))
        #expect(checked.fields.map(\.0) == plain.fields.map(\.0))
        #expect(checked.fields.map(\.1) == plain.fields.map(\.1))
        #expect(checked.fields.contains { $0 == (":authority", "api.example") })
        #expect(!checked.fields.contains { $0.0 == "connection" || $0.0 == "host" })
    }

    /// The forwarding fields come from the worker's cache while the address
    /// and scheme stay, are rendered again when either changes, equal an
    /// uncached head's, and an address that cannot be sent is refused every time.
    @Test func forwardingFieldsAreCachedPerAddressAndScheme() throws {
        let cache = ForwardingCache()
        let client = HTTPHeaders([("accept", "*/*")])
        for (address, scheme) in [
            ("10.1.2.3", "https"), ("10.1.2.3", "https"), ("10.9.9.9", "https"), ("10.9.9.9", "http"),
            ("2001:db8::1", "http"), ("10.1.2.3", "https"),
        ] {
            let cached = try #require(Self.rewritten(client, address: address, scheme: scheme, checked: true, forwarding: cache))
            let plain = try #require(Self.rewritten(client, address: address, scheme: scheme))
            #expect(cached.fields.map(\.0) == plain.fields.map(\.0))
            #expect(cached.fields.map(\.1) == plain.fields.map(\.1))
            #expect(cache.http2.client == address && cache.http2.scheme == scheme)
            #expect(cached.fields.contains { $0 == ("x-forwarded-for", address) })
            #expect(cached.fields.contains { $0 == ("x-forwarded-proto", scheme) })
        }
        // A client that sent its own list is rendered as before, not from the cache.
        let listed = try #require(
            Self.rewritten(HTTPHeaders([("x-forwarded-for", "1.1.1.1")]), checked: true, forwarding: cache))
        #expect(listed.fields.contains { $0 == ("x-forwarded-for", "1.1.1.1, 10.1.2.3") })
        #expect(Self.rewritten(client, address: "10.0.0.1\r\nx: y", forwarding: cache) == nil)
        #expect(Self.rewritten(client, address: "10.0.0.1\r\nx: y", forwarding: cache) == nil)
        #expect(Self.rewritten(client, address: "10.1.2.3", forwarding: cache) != nil)
    }

    /// The request id and the trust signature are new with every request:
    /// they go to an h2 upstream never-indexed, so the HPACK table stops
    /// growing once the fields that repeat are in it (each unique value would
    /// be inserted, then push out one that repeats). Fields that repeat are
    /// still indexed.
    @Test func perRequestValuesGoNeverIndexed() throws {
        let client = HTTPHeaders([("accept", "*/*")])
        func head(_ n: Int) throws -> UpstreamH2Head {
            try #require(
                Self.rewritten(
                    client, requestId: "\(n)-4c1e2d3a-5b6f-4a7b-8c9d-0e1f2a3b4c5d",
                    extra: [("X-AssertGate-Trust", "none"), ("X-AssertGate-Signature", "v1;t=\(n);s=abcdef0123456789")],
                    snapshot: Self.signingSnapshot))
        }
        var flagged: [String] = []
        let first = try head(1)
        first.forEachSpan { s, never in
            if never { flagged.append(String(decoding: first.bytes[s.nameStart..<s.nameStart + s.nameLength], as: UTF8.self)) }
        }
        #expect(flagged == ["x-request-id", "x-assertgate-signature"])
        // Unsigned headers have no signature: a field of that name is then an ordinary one.
        let unsigned = try #require(
            Self.rewritten(client, extra: [("X-AssertGate-Trust", "none"), ("X-AssertGate-Signature", "spoof")]))
        var unsignedFlagged: [String] = []
        unsigned.forEachSpan { s, never in
            if never { unsignedFlagged.append(String(decoding: unsigned.bytes[s.nameStart..<s.nameStart + s.nameLength], as: UTF8.self)) }
        }
        #expect(unsignedFlagged == ["x-request-id"])

        let pair = try HTTP2ClientSessionTests.Pair()
        _ = try pair.client.submitRequest(first, body: nil)
        try pair.run()
        let settled = pair.client.encoderTableSize
        #expect(settled > 0, "the fields that repeat were indexed")
        for n in 2...4 {
            _ = try pair.client.submitRequest(try head(n), body: nil)
            try pair.run()
            #expect(pair.client.encoderTableSize == settled, "request \(n) grew the table")
        }
        // The same value sent as an ordinary field is indexed: what the table size shows.
        var plain = UpstreamH2Head(method: "GET", target: "/a", scheme: "http", trailers: false)
        plain.add(name: "x-request-id", value: "5-4c1e2d3a-5b6f-4a7b-8c9d-0e1f2a3b4c5d")
        plain.finish()
        _ = try pair.client.submitRequest(plain, body: nil)
        try pair.run()
        #expect(pair.client.encoderTableSize > settled)
        #expect(pair.serverEvents.count > 0)
    }
}

@Suite struct GRPCTimeoutTests {
    @Test func unitsAndLimits() {
        #expect(GRPCTimeout.parse("100m") == .milliseconds(100))
        #expect(GRPCTimeout.parse("2S") == .seconds(2))
        #expect(GRPCTimeout.parse("1H") == .hours(1))
        #expect(GRPCTimeout.parse("3M") == .minutes(3))
        #expect(GRPCTimeout.parse("5u") == .microseconds(5))
        #expect(GRPCTimeout.parse("99999999n") == .nanoseconds(99_999_999))
        // Nine digits, no unit, a sign, an unknown unit, empty: ignored.
        for bad in ["123456789S", "100", "-1S", "10x", "", "S", " 1S"] { #expect(GRPCTimeout.parse(bad) == nil) }
        #expect(GRPCTimeout.parse(nil) == nil)
    }
}

@Suite struct TrailerFilterTests {
    @Test func trustPrefixedForwardingAndHopByHopNamesNeverPassInTrailers() {
        let fields: HTTPHeaders = [
            "grpc-status": "0", "X-AssertGate-Trust": "verified", "x-forwarded-for": "1.2.3.4", "connection": "close",
            "x-app-trailer": "kept",
        ]
        let kept = RequestPipeline.filterTrailers(fields, prefix: Array("x-assertgate-".utf8))
        #expect(kept.map(\.name) == ["grpc-status", "x-app-trailer"])
    }

    @Test func underscoresFollowThePolicyAndNeverSpellATrustName() {
        let fields: HTTPHeaders = ["x_assertgate_user": "u1", "x_forwarded_for": "6.6.6.6", "x_app": "a", "x-app": "b"]
        let prefix = Array("x-assertgate-".utf8)
        #expect(RequestPipeline.filterTrailers(fields, prefix: prefix).map(\.name) == ["x-app"])
        #expect(RequestPipeline.filterTrailers(fields, prefix: prefix, dropUnderscores: false).map(\.name) == ["x_app", "x-app"])
    }
}
