import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import AssertGateCore

/// The request head written as bytes must carry exactly the headers of `upstreamRequestHeaders`,
/// and refuse what NIO's header validator refused.
@Suite struct UpstreamRequestHeadTests {
    private let snapshot = GatewaySnapshot(config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: []))
    private let route = RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "u", mode: .passthrough)

    private func head(
        method: String = "GET", target: String = "/a?b=1", client: HTTPHeaders, framing: RequestBodyFraming = .none,
        address: String? = "10.1.2.3", scheme: String = "https", checked: Bool = false, forwarding: ForwardingCache? = nil
    ) -> UpstreamRequestHead? {
        HeaderRewriter.upstreamRequestHead(
            for: request(method: method, target: target, client: client, address: address, scheme: scheme, checked: checked),
            route: route, extra: [("X-AssertGate-Trust", "none")], bodyFraming: framing, allocator: ByteBufferAllocator(),
            forwarding: forwarding)
    }

    private func request(
        method: String = "GET", target: String = "/a?b=1", client: HTTPHeaders, address: String?, scheme: String = "https",
        checked: Bool = false
    ) -> ProxyRequest {
        var r = ProxyRequest(
            method: method, target: target, authority: "api.example", scheme: scheme, headers: client, requestId: "rid",
            clientAddress: address, snapshot: snapshot)
        r.fieldsChecked = checked
        return r
    }

    /// The forwarding lines come from the worker's last rendering when the
    /// address and scheme are the same, and are rendered again when either
    /// changes; the bytes are those of a head written without the cache.
    @Test func forwardingLinesAreCachedPerAddressAndScheme() throws {
        let cache = ForwardingCache()
        let client = HTTPHeaders([("Accept", "*/*")])
        for (address, scheme) in [
            ("10.1.2.3", "https"), ("10.1.2.3", "https"), ("10.9.9.9", "https"), ("10.9.9.9", "http"),
            ("2001:db8::1", "http"), ("2001:db8::1", "http"), ("10.1.2.3", "https"),
        ] {
            let cached = try #require(head(client: client, address: address, scheme: scheme, forwarding: cache))
            let plain = try #require(head(client: client, address: address, scheme: scheme))
            #expect(String(buffer: cached.bytes) == String(buffer: plain.bytes))
            #expect(cache.http1.client == address && cache.http1.scheme == scheme)
            let text = String(buffer: cached.bytes)
            let node = address.contains(":") ? "\"[\(address)]\"" : address
            #expect(text.hasSuffix(
                "X-Forwarded-For: \(address)\r\nForwarded: for=\(node);proto=\(scheme)\r\n"
                    + "X-Forwarded-Proto: \(scheme)\r\nX-AssertGate-Trust: none\r\n\r\n"))
        }
        // The client's own lists are never taken from the cache.
        let lists = HTTPHeaders([("X-Forwarded-For", "1.1.1.1"), ("Forwarded", "for=1.1.1.1")])
        let h = try #require(head(client: lists, forwarding: cache))
        #expect(String(buffer: h.bytes) == String(buffer: try #require(head(client: lists)).bytes))
        #expect(String(buffer: h.bytes).contains("X-Forwarded-For: 1.1.1.1, 10.1.2.3\r\n"))
        // An address that cannot be sent is refused, cached or not.
        #expect(head(client: client, address: "10.0.0.1\r\nX: y", forwarding: cache) == nil)
        #expect(head(client: client, address: "10.0.0.1\r\nX: y", forwarding: cache) == nil)
        #expect(head(client: client, address: "10.1.2.3", forwarding: cache) != nil)
    }

    /// HTTP/2 intake (nghttp2) already refused bad client fields: they are
    /// copied as they are. Everything the gateway adds is still checked, and
    /// the HTTP/1.1 path checks the client's fields too.
    @Test func checkedClientFieldsAreCopiedAndTheRestIsStillChecked() throws {
        let client = HTTPHeaders([("accept", "*/*"), ("user-agent", "t\tu é")])
        let fast = try #require(head(client: client, checked: true))
        #expect(String(buffer: fast.bytes) == String(buffer: try #require(head(client: client)).bytes))
        #expect(head(client: HTTPHeaders([("X-Bad", "a\r\nInjected: 1")]), checked: false) == nil)
        #expect(head(target: "/a b", client: client, checked: true) == nil)
        #expect(head(method: "G(T", client: client, checked: true) == nil)
        #expect(head(client: client, address: "1.2.3.4\n", checked: true) == nil)
    }

    @Test func bytesMatchTheHeaderList() throws {
        let client = HTTPHeaders([
            ("Accept", "*/*"), ("X-Forwarded-For", "1.1.1.1"), ("Forwarded", "for=1.1.1.1"), ("Connection", "keep-alive"),
        ])
        let h = try #require(head(method: "POST", client: client, framing: .chunked, address: "2001:db8::1"))
        let expected = HeaderRewriter.upstreamRequestHeaders(
            for: request(method: "POST", client: client, address: "2001:db8::1"), route: route,
            extra: [("X-AssertGate-Trust", "none")], bodyFraming: .chunked)
        var text = "POST /a?b=1 HTTP/1.1\r\n"
        for (n, v) in expected { text += "\(n): \(v)\r\n" }
        text += "\r\n"
        #expect(String(buffer: h.bytes) == text)
        #expect(text.contains("Forwarded: for=1.1.1.1, for=\"[2001:db8::1]\";proto=https\r\n"))
        #expect(text.contains("X-Forwarded-For: 1.1.1.1, 2001:db8::1\r\n"))
        #expect(h.chunked)
        #expect(!h.isHead)
    }

    @Test func headRequestsAreMarked() throws {
        let h = try #require(head(method: "HEAD", client: HTTPHeaders()))
        #expect(h.isHead)
        #expect(!h.chunked)
        #expect(String(buffer: h.bytes).hasPrefix("HEAD /a?b=1 HTTP/1.1\r\nHost: api.example\r\n"))
    }

    @Test func invalidHeadsAreRefused() {
        #expect(head(client: HTTPHeaders([("X-Bad", "a\r\nInjected: 1")])) == nil)
        #expect(head(client: HTTPHeaders([("X-Nul", "a\u{0}b")])) == nil)
        #expect(head(client: HTTPHeaders([("Bad Name", "v")])) == nil)
        #expect(head(client: HTTPHeaders([("X-Del", "a\u{7F}")])) == nil)
        #expect(head(client: HTTPHeaders([("X-Ctl", "a\u{1}")])) == nil)
        #expect(head(target: "/a b", client: HTTPHeaders()) == nil)
        #expect(head(method: "G(T", client: HTTPHeaders()) == nil)
        #expect(head(client: HTTPHeaders([("X-Tab", "a\tb"), ("X-Utf8", "é")])) != nil)
    }

    @Test func chunkFramingIsWrittenPastTheDecoder() throws {
        let channel = EmbeddedChannel()
        try UpstreamClientHandler.install(on: channel.pipeline.syncOperations)
        let handler = try channel.pipeline.syncOperations.handler(type: UpstreamClientHandler.self)
        var body = channel.allocator.buffer(capacity: 26)
        body.writeString(String(repeating: "x", count: 26))
        handler.writeChunk(body, promise: nil)
        handler.writeChunk(channel.allocator.buffer(capacity: 0), promise: nil)
        handler.writeLastChunk()
        handler.flush()
        var out = ""
        while let b = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: b) }
        #expect(out == "1a\r\n" + String(repeating: "x", count: 26) + "\r\n0\r\n\r\n")
        _ = try channel.finish()
    }

    /// A head longer than the room first lent is written again, whole, with more.
    @Test func aHeadPastItsFirstRoomIsWrittenWhole() {
        let long = String(repeating: "v", count: 300)
        var b = ByteBufferAllocator().buffer(capacity: 0)
        b.writeString("kept|")
        let valid = UpstreamHeadWriter.write(into: &b, capacity: 16) { w in
            w.requestLine(method: "GET", target: "/x")
            w.add(name: "A", value: long)
            w.finish()
        }
        #expect(valid)
        #expect(String(buffer: b) == "kept|GET /x HTTP/1.1\r\nA: \(long)\r\n\r\n")

        var bad = ByteBufferAllocator().buffer(capacity: 0)
        let refused = UpstreamHeadWriter.write(into: &bad, capacity: 16) { w in
            w.requestLine(method: "GET", target: "/x")
            w.add(name: "B", value: "c\r\nd")
        }
        #expect(!refused)
    }
}
