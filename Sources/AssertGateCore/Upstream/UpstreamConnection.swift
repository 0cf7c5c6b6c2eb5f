import NIOCore
import NIOHTTP1

/// Receives one exchange's events. All calls on the worker's event loop.
protocol UpstreamExchangeDelegate: AnyObject {
    func upstreamLeased(_ connection: UpstreamConnection)
    func upstreamLeaseFailed(_ error: UpstreamError)
    func upstreamResponseHead(_ head: HTTPResponseHead)
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

    private var requestDone = false
    private var responseDone = false
    private var responseKeepAlive = true
    private(set) var isClosed = false

    /// Response-head deadline, checked by the worker's sweep.
    var responseDeadline: NIODeadline?
    var responseTimeout: TimeAmount = .seconds(30)
    var idleSince: NIODeadline = .distantPast
    var idleTimeout: TimeAmount = .seconds(60)
    /// Position in the pool's in-flight list (swap-remove), -1 when not in it.
    var inflightIndex = -1

    init(channel: Channel, endpoint: EndpointPool, handler: UpstreamClientHandler) {
        self.channel = channel
        self.endpoint = endpoint
        self.handler = handler
        handler.connection = self
    }

    /// Exchanges started on this connection (> 1: it came from the keep-alive pool).
    private(set) var exchanges = 0

    func begin(delegate: UpstreamExchangeDelegate, responseTimeout: TimeAmount, idleTimeout: TimeAmount) {
        exchanges += 1
        self.delegate = delegate
        self.requestDone = false
        self.responseDone = false
        self.responseKeepAlive = true
        self.responseStarted = false
        self.responseTimeout = responseTimeout
        self.idleTimeout = idleTimeout
        self.responseDeadline = nil
        endpoint.pool.trackInflight(self)
    }

    func sendHead(_ head: HTTPRequestHead, end: Bool) {
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if end { sendEnd() } else { channel.flush() }
    }

    func sendBody(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: promise)
    }

    func sendEnd() {
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
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

    func received(_ part: HTTPClientResponsePart) {
        switch part {
        case .head(let head):
            if head.status.code < 200, head.status.code != 101 { return }  // 1xx interim: skip
            responseDeadline = nil
            responseStarted = true
            responseKeepAlive = head.isKeepAlive
            delegate?.upstreamResponseHead(head)
        case .body(let buffer):
            delegate?.upstreamResponseBody(buffer)
        case .end:
            responseDone = true
            responseDeadline = nil
            let d = delegate
            if !requestDone {
                // Answered before the request body was sent: cannot be reused.
                delegate = nil
                close()
            }
            d?.upstreamResponseEnd()
            maybeRelease()
        }
    }

    /// No byte of the response arrived yet on this exchange.
    private(set) var responseStarted = false

    func channelClosed() {
        guard !isClosed else { return }
        isClosed = true
        endpoint.pool.untrackInflight(self)
        endpoint.connectionClosed(self)
        let d = delegate
        delegate = nil
        if !responseDone { d?.upstreamFailed(.connectionLost) }
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

/// The last handler of an upstream channel: forwards parts to the connection and
/// holds `read()` while the downstream is congested (back-pressure).
final class UpstreamClientHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    var connection: UpstreamConnection?
    var readsPaused = false
    private var pendingRead = false
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection?.received(unwrapInboundIn(data))
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
        connection = nil
        c?.channelClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Parse errors or resets: the exchange fails via channelInactive.
        context.close(promise: nil)
    }
}
