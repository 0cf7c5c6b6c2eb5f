import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Verifier

/// The admin listener (protocol.md §7): HTTP/1.1 on `admin.address`, serving
/// `/healthz`, `/readyz`, `/metrics` and, with the bearer token, `/keys/*`
/// and `/reload` through `AdminActions`.
public final class AdminServer: Sendable {
    public let router: AdminRouter
    private let channel: any Channel

    /// The port actually bound (useful with port 0).
    public let port: Int

    private init(router: AdminRouter, channel: any Channel, port: Int) {
        self.router = router
        self.channel = channel
        self.port = port
    }

    /// What one admin client can hold: the listener is for a scraper and an
    /// operator, not for the public, but a stuck or hostile local client must
    /// not take the process's file descriptors.
    public struct Limits: Sendable {
        /// Connections open at once; one more is closed as it is accepted.
        public var maxConnections = 64
        /// A request, head and body, must be complete this long after its
        /// first byte (one trickled a byte at a time resets any idle clock).
        public var headerTimeout: TimeAmount = .seconds(10)
        /// A connection with no byte read or written for this long is closed.
        public var idleTimeout: TimeAmount = .seconds(60)
        public init() {}
    }

    /// Binds and starts serving.
    /// - Parameters:
    ///   - readiness: answers whether the store is reachable (Redis `PING`); bounded by a 2 s timeout.
    ///   - actions: key lookup, revoke and reload; nil turns those routes off like a missing token.
    public static func start(
        address: HostPort, token: Secret?, metrics: MetricsRegistry,
        readiness: @escaping @Sendable () async -> Bool, actions: (any AdminActions)?,
        exhaustedUpstreams: @escaping @Sendable () -> [String] = { [] },
        draining: @escaping @Sendable () -> Bool = { false },
        group: any EventLoopGroup, logger: Logger = Logger(label: "assertgate.admin"), limits: Limits = Limits()
    ) async throws -> AdminServer {
        let open = AdminConnectionCount()
        let router = AdminRouter(
            token: token, metrics: metrics, readiness: readiness, actions: actions,
            exhaustedUpstreams: exhaustedUpstreams, draining: draining, logger: logger)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                guard open.admit(limit: limits.maxConnections) else {
                    return channel.close()
                }
                channel.closeFuture.whenComplete { _ in open.leave() }
                return channel.eventLoop.makeCompletedFuture {
                    // Stuck, idle and trickling clients are closed (the listeners' own
                    // clock: no byte for idleTimeout, a head not whole in headerTimeout).
                    let timeouts = ConnectionTimeoutHandler(
                        handshakeTimeout: limits.headerTimeout, idleTimeout: limits.idleTimeout,
                        headerTimeout: limits.headerTimeout)
                    try channel.pipeline.syncOperations.addHandler(timeouts)
                    // Parse errors are answered by AdminHTTPHandler: problem+json with an
                    // X-Request-Id, like every other admin error (protocol.md §7).
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: false)
                    try channel.pipeline.syncOperations.addHandler(AdminHTTPHandler(router: router, timeouts: timeouts))
                }
            }
            .bind(host: address.host, port: address.port).get()
        let port = channel.localAddress?.port ?? address.port
        logger.info("admin listener started", metadata: ["address": "\(HostPort(host: address.host, port: port))"])
        return AdminServer(router: router, channel: channel, port: port)
    }

    /// Replaces the bearer token (after a reload).
    public func update(token: Secret?) {
        router.update(token: token)
    }

    /// Stops accepting; open connections finish their current request.
    public func close() async throws {
        try await channel.close()
    }
}

/// Reads one request at a time (the pipeline handler holds back pipelined
/// ones), asks the router, writes the answer. Bodies are discarded: no admin
/// route takes one, and more than 64 KiB is refused.
final class AdminHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: AdminRouter
    private let timeouts: ConnectionTimeoutHandler?
    private var head: HTTPRequestHead?
    private var bodyBytes = 0
    private var active = true
    /// A request was handed to the router and its answer is not written yet.
    private var answering = false
    static let maxBodyBytes = 64 << 10

    init(router: AdminRouter, timeouts: ConnectionTimeoutHandler? = nil) {
        self.router = router
        self.timeouts = timeouts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        timeouts?.markEstablished()
        timeouts?.awaitRequestHead()
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            // The header clock runs on until the body's end: no admin request
            // has a body worth waiting for, and a trickled one (a byte every
            // few seconds, each resetting the idle clock) would hold one of
            // the listener's few connections for ever.
            head = h
            bodyBytes = 0
            if let length = h.headers.first(name: "content-length").flatMap({ Int($0) }), length > Self.maxBodyBytes {
                self.head = nil
                let requestId = RequestId.resolve(h.headers.first(name: "x-request-id"))
                let response = AdminResponse(ProblemWriter.answer(Rejection(.bodyTooLarge), requestId: requestId))
                write(response, for: h, context: context, forceClose: true)
            }
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
        case .end:
            guard let head else { return }
            timeouts?.requestHeadReceived()
            self.head = nil
            if bodyBytes > Self.maxBodyBytes {
                let requestId = RequestId.resolve(head.headers.first(name: "x-request-id"))
                let response = AdminResponse(ProblemWriter.answer(Rejection(.bodyTooLarge), requestId: requestId))
                write(response, for: head, context: context, forceClose: true)
                return
            }
            let request = AdminRequest(
                method: head.method.rawValue, uri: head.uri,
                authorization: head.headers.first(name: "authorization"),
                requestIdHeader: head.headers.first(name: "x-request-id"))
            let router = self.router
            answering = true
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask {
                await router.respond(to: request)
            }.whenSuccess { response in
                let (handler, context) = bound.value
                handler.write(response, for: head, context: context, forceClose: false)
            }
        }
    }

    /// Bytes that are not HTTP/1.1: answered 400 `malformed-request` (431
    /// `headers-too-large` for an oversized head) and the connection closed,
    /// unless an answer is still owed on it, which a parse error cannot wait for.
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let parseError = error as? HTTPParserError, active, !answering else {
            context.close(promise: nil)
            return
        }
        let reason: ReasonToken = parseError == .headerOverflow ? .headersTooLarge : .malformedRequest
        let requestId = RequestId.resolve(nil)
        let response = AdminResponse(ProblemWriter.answer(Rejection(reason), requestId: requestId))
        head = nil
        write(response, for: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), context: context, forceClose: true)
        active = false  // nothing more is read from a stream that lost its framing
    }

    private func write(_ response: AdminResponse, for head: HTTPRequestHead, context: ChannelHandlerContext, forceClose: Bool) {
        answering = false
        // The connection may have gone away while an action was running.
        guard active else { return }
        let keepAlive = head.isKeepAlive && !forceClose
        var headers = HTTPHeaders(response.headers)
        let body = head.method == .HEAD ? "" : response.body
        headers.replaceOrAdd(name: "Content-Length", value: String(response.body.utf8.count))
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let responseHead = HTTPResponseHead(
            version: head.version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        if !body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: body.utf8.count)
            buffer.writeString(body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if keepAlive { timeouts?.awaitRequestHead() }
        if !keepAlive {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }
}

/// Admin connections open now, over every event loop the listener accepts on.
private final class AdminConnectionCount: Sendable {
    private let open = Atomic<Int>(0)

    /// Counts one more connection unless `limit` are open.
    func admit(limit: Int) -> Bool {
        var current = open.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, actual) = open.compareExchange(
                expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { return true }
            current = actual
        }
        return false
    }

    func leave() { open.subtract(1, ordering: .relaxed) }
}
