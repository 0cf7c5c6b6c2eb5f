import GatewayTLS
import NIOCore

/// Receives one exchange's events. All calls on the worker's event loop.
protocol UpstreamExchangeDelegate: AnyObject {
    func upstreamLeased(_ connection: UpstreamConnection)
    func upstreamLeaseFailed(_ error: UpstreamError)
    /// The head's bytes are the parser's: read them before returning.
    func upstreamResponseHead(_ head: UpstreamResponseHead)
    func upstreamResponseBody(_ buffer: ByteBuffer)
    func upstreamResponseEnd()
    /// The exchange failed after the lease (before or during the response).
    func upstreamFailed(_ error: UpstreamError)
}

/// One HTTP/1.1 keep-alive connection to an endpoint, loop-confined.
final class UpstreamConnection {
    let channel: Channel
    unowned let endpoint: EndpointPool
    private unowned let handler: UpstreamClientHandler
    var delegate: UpstreamExchangeDelegate?

    /// The whole request (head, body, last chunk) has been written.
    private(set) var requestDone = false
    private var responseDone = false
    private var responseKeepAlive = true
    private(set) var isClosed = false

    /// Response-head deadline (or, once the client left, the drain deadline),
    /// checked by the worker's sweep.
    var responseDeadline: NIODeadline?
    /// The client left: the rest of the response is read and dropped (`drainForLeavingClient`).
    private var draining = false
    var responseTimeout: TimeAmount = .seconds(30)
    var idleSince: NIODeadline = .distantPast
    var idleTimeout: TimeAmount = .seconds(60)
    /// Position in the pool's in-flight list (swap-remove), -1 when not in it.
    var inflightIndex = -1

    /// The TLS settings the connection was verified with (nil: cleartext).
    let tls: UpstreamTLS?

    init(channel: Channel, endpoint: EndpointPool, handler: UpstreamClientHandler, tls: UpstreamTLS? = nil) {
        self.channel = channel
        self.endpoint = endpoint
        self.handler = handler
        self.tls = tls
        handler.connection = self
    }

    /// Exchanges started on this connection (> 1: it came from the keep-alive pool).
    private(set) var exchanges = 0

    /// The client address the current exchange counts against (`maxConnectionsPerClient`).
    private var leaseClient: String?

    /// Ends the current lease's count against its client (once): returns the client.
    func endLease() -> String? {
        defer { leaseClient = nil }
        return leaseClient
    }

    func begin(
        delegate: UpstreamExchangeDelegate, client: String? = nil, responseTimeout: TimeAmount, idleTimeout: TimeAmount
    ) {
        exchanges += 1
        leaseClient = client
        self.delegate = delegate
        self.requestDone = false
        self.responseDone = false
        self.responseKeepAlive = true
        self.responseStarted = false
        self.responseTimeout = responseTimeout
        self.idleTimeout = idleTimeout
        self.responseDeadline = nil
        self.draining = false
        self.quietSince = nil
        endpoint.pool.trackInflight(self)
    }

    /// Body framing of the current exchange (chunk headers are added here).
    private var chunked = false

    func sendHead(_ head: UpstreamRequestHead, end: Bool) {
        chunked = head.chunked
        handler.writeHead(head)
        if end { sendEnd() } else { handler.flush() }
    }

    func sendBody(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        if chunked {
            handler.writeChunk(buffer, promise: promise)
        } else {
            handler.write(buffer, promise: promise)
        }
        handler.flush()
    }

    func sendEnd() {
        if chunked { handler.writeLastChunk() }
        handler.flush()
        requestDone = true
        if !responseDone, responseDeadline == nil {
            responseDeadline = .now() + responseTimeout
        }
        maybeRelease()
    }

    func pauseReads() { handler.readsPaused = true }
    func resumeReads() { handler.resumeReads() }

    /// Leased but never used (the client went away while waiting): back to the pool.
    func releaseUnused() {
        delegate = nil
        endpoint.pool.untrackInflight(self)
        endpoint.release(self)
    }

    /// The client left after the whole request was sent: the response is read
    /// and dropped so the connection can be reused, but no longer than the
    /// response timeout from now (the sweep closes it then, as for a late head).
    func drainForLeavingClient() {
        draining = true
        let due = NIODeadline.now() + responseTimeout
        if responseDeadline.map({ $0 > due }) ?? true { responseDeadline = due }
    }

    /// The exchange is abandoned (client gone, error): never reuse this connection.
    func abandon() {
        delegate = nil
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        endpoint.pool.untrackInflight(self)
        endpoint.connectionClosed(self)
        channel.close(promise: nil)
    }

    /// Sweep: the response head is overdue.
    func responseTimedOut() {
        let d = delegate
        delegate = nil
        close()
        d?.upstreamFailed(.responseTimeout)
    }

    // MARK: from the channel handler

    func receivedHead(_ head: UpstreamResponseHead, keepAlive: Bool) {
        // A drain deadline (the client left) stays: the body must come within it.
        if !draining { responseDeadline = nil }
        responseStarted = true
        responseReads &+= 1
        responseKeepAlive = keepAlive
        delegate?.upstreamResponseHead(head)
    }

    func receivedBody(_ buffer: ByteBuffer) {
        responseReads &+= 1
        delegate?.upstreamResponseBody(buffer)
    }

    /// Response parts delivered so far (head and body chunks): a counter, so
    /// the read path takes no clock; the sweep turns it into quiet time.
    private var responseReads = 0
    private var readsAtLastSweep = 0
    /// Since when the sweep has seen no new part (nil: progress, or nothing to wait for).
    private var quietSince: NIODeadline?

    /// Sweep (every 100 ms): a response that started and then went quiet for
    /// `responseTimeout` while the gateway was reading it (not paused for a
    /// slow client).
    func responseStalled(now: NIODeadline) -> Bool {
        guard responseStarted, !responseDone, !handler.readsPaused, responseReads == readsAtLastSweep else {
            readsAtLastSweep = responseReads
            quietSince = nil
            return false
        }
        guard let since = quietSince else {
            quietSince = now
            return false
        }
        return since + responseTimeout <= now
    }

    /// `reusable`: false when bytes followed the response (the connection is closed after).
    func receivedEnd(reusable: Bool) {
        responseDone = true
        responseDeadline = nil
        if !reusable { responseKeepAlive = false }
        let d = delegate
        if !requestDone {
            // Answered before the request body was sent: cannot be reused.
            delegate = nil
            close()
        }
        d?.upstreamResponseEnd()
        maybeRelease()
    }

    /// No byte of the response arrived yet on this exchange.
    private(set) var responseStarted = false

    /// The handler refused the response: the close that follows reports `.invalidResponse`.
    var responseInvalid = false

    func channelClosed() {
        guard !isClosed else { return }
        isClosed = true
        endpoint.pool.untrackInflight(self)
        endpoint.connectionClosed(self)
        let d = delegate
        delegate = nil
        if !responseDone { d?.upstreamFailed(responseInvalid ? .invalidResponse : .connectionLost) }
    }

    private func maybeRelease() {
        guard requestDone, responseDone, !isClosed else { return }
        delegate = nil
        endpoint.pool.untrackInflight(self)
        if responseKeepAlive {
            handler.readsPaused = false
            endpoint.release(self)
        } else {
            close()
        }
    }
}

/// A request head already serialised by `HeaderRewriter` (see `UpstreamHeadWriter`).
struct UpstreamRequestHead {
    var bytes: ByteBuffer
    /// HEAD: the response decoder must not expect a body.
    var isHead: Bool
    /// `Transfer-Encoding: chunked` was written: body writes get chunk framing.
    var chunked: Bool
}

/// The last handler of an upstream channel: parses responses
/// (`UpstreamResponseParser`, straight from the socket's buffers) for the
/// connection and holds `read()` while the downstream is congested
/// (back-pressure). Writes the request (head bytes, body, chunk framing)
/// from its own context, towards the socket (and TLS, when there is one).
final class UpstreamClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    /// Nothing passes through this handler outbound (it is the last one); it
    /// writes from its own context and holds `read()`.
    typealias OutboundIn = ByteBuffer

    var connection: UpstreamConnection?
    var readsPaused = false
    private var pendingRead = false
    private var context: ChannelHandlerContext?
    private var parser = UpstreamResponseParser()

    /// The TLS handler in front of this one (nil: cleartext), for whether the
    /// peer's close came with close_notify. It holds no reference back.
    private let tls: OpenSSLHandler?

    init(tls: OpenSSLHandler?) {
        self.tls = tls
    }

    /// The last handler of an upstream channel, after `tls` when there is one.
    static func install(on pipeline: ChannelPipeline.SynchronousOperations, tls: OpenSSLHandler? = nil) throws {
        try pipeline.addHandler(UpstreamClientHandler(tls: tls))
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func writeHead(_ head: UpstreamRequestHead) {
        parser.expectResponse(isHead: head.isHead)
        write(head.bytes, promise: nil)
    }

    func write(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard let ctx = context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        ctx.write(NIOAny(buffer), promise: promise)
    }

    func writeChunk(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        let n = buffer.readableBytes
        guard n > 0 else {
            promise?.succeed()
            return
        }
        var header = (context?.channel.allocator ?? ByteBufferAllocator()).buffer(capacity: 18)
        header.writeString(String(n, radix: 16))
        header.writeStaticString("\r\n")
        write(header, promise: nil)
        write(buffer, promise: nil)
        var crlf = header
        crlf.clear()
        crlf.writeStaticString("\r\n")
        write(crlf, promise: promise)
    }

    func writeLastChunk() {
        var last = (context?.channel.allocator ?? ByteBufferAllocator()).buffer(capacity: 5)
        last.writeStaticString("0\r\n\r\n")
        write(last, promise: nil)
    }

    func flush() { context?.flush() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        do {
            while true {
                // The parser's access ends with each event: what the connection does
                // with it (release, a new exchange's writeHead) may touch the parser.
                switch try parser.next(&buffer) {
                case .needMore:
                    return
                case .head(let head, let keepAlive):
                    connection?.receivedHead(head, keepAlive: keepAlive)
                case .body(let slice):
                    connection?.receivedBody(slice)
                case .end:
                    let trailing = buffer.readableBytes > 0
                    connection?.receivedEnd(reusable: !trailing)
                    if trailing { throw UpstreamResponseError.unexpectedBytes }
                }
            }
        } catch {
            // A response that cannot be read: the exchange fails via channelInactive.
            // Logged like nginx's "upstream sent invalid header": the upstream is broken.
            if let c = connection {
                c.responseInvalid = true
                c.endpoint.pool.logger.warning(
                    "upstream response refused", metadata: ["endpoint": "\(c.endpoint.endpoint)", "error": "\(error)"])
            }
            context.close(promise: nil)
        }
    }

    func read(context: ChannelHandlerContext) {
        if readsPaused {
            pendingRead = true
        } else {
            context.read()
        }
    }

    func resumeReads() {
        readsPaused = false
        if pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        let c = connection
        // A body delimited by the close is complete now, unless the close was
        // an error (a reset): then the client must see it cut, not complete.
        // NIO does not report every reset (one met while flushing a request body
        // closes without errorCaught), so a close before the request was fully
        // sent counts as an error too.
        // Over TLS only a close_notify ends such a body: a bare FIN could be
        // anyone's, and would pass a truncated body on as complete.
        if parser.connectionClosed(), !failed, c?.requestDone == true,
            c?.tls == nil || tls?.receivedCloseNotify == true
        {
            c?.receivedEnd(reusable: false)
        }
        connection = nil
        c?.channelClosed()
        context.fireChannelInactive()
    }

    /// An error (a reset) came before the close.
    private var failed = false

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Resets and the like: the exchange fails via channelInactive.
        failed = true
        context.close(promise: nil)
    }
}
