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
        address: String? = "10.1.2.3"
    ) -> UpstreamRequestHead? {
        HeaderRewriter.upstreamRequestHead(
            method: method, target: target, client: client, authority: "api.example", route: route,
            snapshot: snapshot, requestId: "rid", clientAddress: address, scheme: "https",
            extra: [("X-AssertGate-Trust", "none")], bodyFraming: framing, allocator: ByteBufferAllocator())
    }

    @Test func bytesMatchTheHeaderList() throws {
        let client = HTTPHeaders([
            ("Accept", "*/*"), ("X-Forwarded-For", "1.1.1.1"), ("Forwarded", "for=1.1.1.1"), ("Connection", "keep-alive"),
        ])
        let h = try #require(head(method: "POST", client: client, framing: .chunked, address: "2001:db8::1"))
        let expected = HeaderRewriter.upstreamRequestHeaders(
            client: client, authority: "api.example", route: route, snapshot: snapshot, requestId: "rid",
            clientAddress: "2001:db8::1", scheme: "https", extra: [("X-AssertGate-Trust", "none")],
            bodyFraming: .chunked)
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
}
