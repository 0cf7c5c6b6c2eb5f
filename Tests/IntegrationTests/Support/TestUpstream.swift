import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A small HTTP/1.1 upstream for the integration tests. It records every request
/// head it receives and serves:
/// - `/hello`: 64 bytes; `/slow?ms=N`: answers after N ms;
/// - `/upload`: counts (and drops) the body, answers `{"received_bytes":N}`;
/// - `/download?bytes=N`: streams N bytes, honouring back-pressure;
/// - `/drop-next`: 200, then the next request on that connection is answered by closing it
///   (a keep-alive connection that died while idle in the gateway's pool);
/// - anything else: 200 `ok`.
final class TestUpstream: Sendable {
    let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    let port: Int
    private let recorded = NIOLockedValueBox<[HTTPRequestHead]>([])
    private let accepted = NIOLockedValueBox(0)
    private let open = NIOLockedValueBox(0)
    /// Downloads whose sending stopped because the gateway stopped reading.
    let stalledDownloads = NIOLockedValueBox(0)
    /// Connections closed while a request body was still arriving.
    let truncatedBodies = NIOLockedValueBox(0)
    /// `/upload` requests whose whole body arrived.
    let completedUploads = NIOLockedValueBox(0)
    private let waiters = NIOLockedValueBox<[(Int, EventLoopPromise<Void>)]>([])

    static let hello = String(repeating: "x", count: 63) + "\n"

    init() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        let box = NIOLockedValueBox<TestUpstream?>(nil)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let me = box.withLockedValue { $0 }
                me?.accepted.withLockedValue { $0 += 1 }
                me?.open.withLockedValue { $0 += 1 }
                channel.closeFuture.whenComplete { _ in me?.open.withLockedValue { $0 -= 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: false)
                    try channel.pipeline.syncOperations.addHandler(
                        TestUpstreamHandler(upstream: me, onHead: { head in box.withLockedValue { $0 }?.record(head) }))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
        box.withLockedValue { $0 = self }
    }

    var requests: [HTTPRequestHead] { recorded.withLockedValue { $0 } }
    /// Connections the gateway opened to this upstream.
    var connectionsAccepted: Int { accepted.withLockedValue { $0 } }
    /// Connections from the gateway open right now (idle keep-alive ones included).
    var openConnections: Int { open.withLockedValue { $0 } }

    private func record(_ head: HTTPRequestHead) {
        let count = recorded.withLockedValue { r -> Int in
            r.append(head)
            return r.count
        }
        let ready = waiters.withLockedValue { w -> [EventLoopPromise<Void>] in
            let done = w.filter { $0.0 <= count }.map(\.1)
            w.removeAll { $0.0 <= count }
            return done
        }
        for p in ready { p.succeed() }
    }

    /// Completes when at least `count` requests have been received.
    func waitForRequests(_ count: Int) async throws {
        let p = group.next().makePromise(of: Void.self)
        let already = recorded.withLockedValue { $0.count >= count }
        if already { return }
        waiters.withLockedValue { $0.append((count, p)) }
        if recorded.withLockedValue({ $0.count >= count }) { p.succeed() }
        try await p.futureResult.get()
    }

    func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }
}

private final class TestUpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let onHead: @Sendable (HTTPRequestHead) -> Void
    private let upstream: TestUpstream?
    private var head: HTTPRequestHead?
    private var received = 0
    private var remaining = 0
    private var downloading = false
    private var dropNext = false
    private var inBody = false

    init(upstream: TestUpstream?, onHead: @escaping @Sendable (HTTPRequestHead) -> Void) {
        self.upstream = upstream
        self.onHead = onHead
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            received = 0
            inBody = true
            onHead(h)
        case .body(let b):
            received += b.readableBytes
        case .end:
            inBody = false
            guard let head else { return }
            if head.uri.hasPrefix("/upload") { upstream?.completedUploads.withLockedValue { $0 += 1 } }
            respond(context: context, head: head)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if inBody { upstream?.truncatedBodies.withLockedValue { $0 += 1 } }
        context.fireChannelInactive()
    }

    private func query(_ uri: String, _ key: String) -> Int? {
        guard let q = uri.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        for pair in q.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0] == key { return Int(kv[1]) }
        }
        return nil
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead) {
        if dropNext {
            context.close(promise: nil)
            return
        }
        var path = head.uri.split(separator: "?").first.map(String.init) ?? head.uri
        // Behind a route prefix (`/dc-device/slow`), still the slow answer.
        if path.hasSuffix("/slow") { path = "/slow" }
        // An upstream that sets DeviceCheck bits, and tries to speak for the gateway.
        echoed = head.headers.first(name: "x-test-set-device-bits").map {
            [("X-AssertGate-Set-Device-Bits", $0), ("X-AssertGate-Trust", "upstream-spoof")]
        } ?? []
        switch path {
        case "/hello":
            send(context, body: TestUpstream.hello, type: "application/json")
        case "/drop-next":
            dropNext = true
            send(context, body: "armed\n", type: "text/plain")
        case "/upload":
            send(context, body: "{\"received_bytes\":\(received)}\n", type: "application/json")
        case "/slow":
            let ms = query(head.uri, "ms") ?? 1000
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(ms))) {
                let (me, ctx) = bound.value
                me.send(ctx, body: "slow\n", type: "text/plain")
            }
        case "/download":
            remaining = query(head.uri, "bytes") ?? 0
            var h = HTTPHeaders()
            h.add(name: "content-length", value: String(remaining))
            h.add(name: "content-type", value: "application/octet-stream")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: h))), promise: nil)
            downloading = true
            pump(context)
        default:
            send(context, body: "ok\n", type: "text/plain")
        }
    }

    private var pumping = false
    /// Response headers the request asked for (`x-test-set-device-bits`).
    private var echoed: [(String, String)] = []

    private func pump(_ context: ChannelHandlerContext) {
        // A flush can fire writability changes re-entrantly: only one pump at a time.
        guard downloading, !pumping else { return }
        pumping = true
        defer { pumping = false }
        while remaining > 0, context.channel.isWritable {
            let n = min(remaining, 64 << 10)
            var b = context.channel.allocator.buffer(capacity: n)
            b.writeRepeatingByte(0x61, count: n)
            remaining -= n
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(b))), promise: nil)
        }
        if remaining == 0 {
            downloading = false
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            upstream?.stalledDownloads.withLockedValue { $0 += 1 }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump(context) }
        context.fireChannelWritabilityChanged()
    }

    private func send(_ context: ChannelHandlerContext, body: String, type: String) {
        var h = HTTPHeaders()
        h.add(name: "content-type", value: type)
        h.add(name: "content-length", value: String(body.utf8.count))
        h.add(name: "x-request-id", value: "upstream-chosen-id")
        h.add(name: "server", value: "test-upstream")
        // Hop-by-hop headers the gateway must not pass on (an h2 client rejects them).
        h.add(name: "connection", value: "x-hop-resp")
        h.add(name: "x-hop-resp", value: "1")
        h.add(name: "keep-alive", value: "timeout=5")
        for (n, v) in echoed { h.add(name: n, value: v) }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: h))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
