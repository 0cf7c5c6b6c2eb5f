import GatewayTLS
import NIOCore
import NIOHTTP1

/// Receives one exchange's events. All calls on the worker's event loop.
protocol UpstreamExchangeDelegate: AnyObject {
    func upstreamLeased(_ exchange: any UpstreamExchange)
    func upstreamLeaseFailed(_ error: UpstreamError)
    /// An interim (1xx) head before the final one.
    func upstreamInterimHead(_ head: UpstreamResponseHead)
    /// The head's bytes are the parser's: read them before returning.
    func upstreamResponseHead(_ head: UpstreamResponseHead)
    func upstreamResponseBody(_ buffer: ByteBuffer)
    /// Trailer fields from an HTTP/2 upstream, before `upstreamResponseEnd`.
    func upstreamResponseTrailers(_ fields: HTTPHeaders)
    func upstreamResponseEnd()
    /// The exchange failed after the lease (before or during the response).
    func upstreamFailed(_ error: UpstreamError)
    /// Still waiting for its lease. A request whose client left (or that was
    /// answered) while it waited says no: the pools skip it when they serve
    /// and drop it at their next sweep, rather than keep it (and its head)
    /// queued until its deadline or hand it a connection it would give back.
    var awaitsLease: Bool { get }
}

extension UpstreamExchangeDelegate {
    var awaitsLease: Bool { true }
    func upstreamInterimHead(_ head: UpstreamResponseHead) {}
}

/// One HTTP/1.1 keep-alive connection to an endpoint, loop-confined.
final class UpstreamConnection: UpstreamExchange {
    let channel: Channel
    unowned let endpoint: EndpointPool
    private unowned let handler: UpstreamClientHandler
    /// The TLS settings the connection was verified with (nil: cleartext).
    let tls: UpstreamTLS?

    /// The current exchange, replaced whole by `begin`: one store per
    /// exchange instead of a dozen (each a possible exclusivity check).
    fileprivate struct Exchange {
        var delegate: UpstreamExchangeDelegate?
        /// The client address the exchange counts against (`maxConnectionsPerClient`); nil once given back.
        var client: String?
        var responseTimeout: TimeAmount
        /// Response-head deadline (or, once the client left, the drain deadline), checked by the sweep.
        var responseDeadline: NIODeadline?
        /// The whole request (head, body, last chunk) has been written.
        var requestDone = false
        /// The response's head arrived.
        var responseStarted = false
        /// A byte of the response arrived (a partial head, a 1xx, garbage):
        /// the upstream took the request, so it is never sent again.
        var bytesArrived = false
        var responseDone = false
        var keepAlive = true
        /// The client left: the rest of the response is read and dropped (`drainForLeavingClient`).
        var draining = false
        /// Body framing (chunk headers are added here).
        var chunked = false
        /// Begun, and neither released nor closed: the sweep watches it.
        var inFlight: Bool
        var quiet = ResponseQuietWatch()
    }
    private var exchange = Exchange(responseTimeout: .seconds(30), inFlight: false)

    private(set) var isClosed = false
    var idleSince: NIODeadline = .distantPast
    private(set) var idleTimeout: TimeAmount = .seconds(60)
    /// Exchanges started on this connection (> 1: it came from the keep-alive pool).
    private(set) var exchanges = 0

    init(channel: Channel, endpoint: EndpointPool, handler: UpstreamClientHandler, tls: UpstreamTLS? = nil) {
        self.channel = channel
        self.endpoint = endpoint
        self.handler = handler
        self.tls = tls
        handler.connection = self
        endpoint.connectionOpened(self)
    }

    /// The whole request (head, body, last chunk) has been written.
    var requestDone: Bool { exchange.requestDone }
    /// An exchange is under way: the sweep checks its deadlines.
    var isInFlight: Bool { exchange.inFlight }

    /// Ends the current lease's count against its client (once): returns the client.
    func endLease() -> String? {
        let client = exchange.client
        exchange.client = nil
        return client
    }

    func begin(
        delegate: UpstreamExchangeDelegate, client: String? = nil, responseTimeout: TimeAmount, idleTimeout: TimeAmount
    ) {
        exchanges += 1
        exchange = Exchange(delegate: delegate, client: client, responseTimeout: responseTimeout, inFlight: true)
        self.idleTimeout = idleTimeout
    }

    func sendHead(_ head: consuming UpstreamHead, end: Bool) {
        guard case .http1(let head) = consume head else {
            preconditionFailure("an HTTP/2 head for an HTTP/1.1 connection")
        }
        exchange.chunked = head.chunked
        if end, head.chunked {
            handler.writeHead(head, flush: false)
            sendEnd()
            return
        }
        // One pipeline traversal (writeAndFlush) instead of a write and a flush.
        handler.writeHead(head, flush: true)
        if end { requestSent() }
    }

    func sendBody(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        if exchange.chunked {
            handler.writeChunk(buffer, promise: promise)
        } else {
            handler.write(buffer, promise: promise)
        }
        handler.flush()
    }

    /// Dropped: request trailers need chunked framing and an upstream that
    /// reads them; HTTP/1.1 upstreams get none (README, Known limits).
    func sendTrailers(_ fields: HTTPHeaders) {}

    func sendEnd() {
        if exchange.chunked { handler.writeLastChunk() }
        handler.flush()
        requestSent()
    }

    /// The whole request is on its way: the response deadline starts.
    private func requestSent() {
        let now = endpoint.pool.eventLoop.now
        exchange.requestSent(now: now)
        maybeRelease()
    }

    func pauseReads() { handler.readsPaused = true }
    func resumeReads() { handler.resumeReads() }

    /// Leased but never used (the client went away while waiting): back to the pool.
    func releaseUnused() {
        exchange.delegate = nil
        exchange.inFlight = false
        endpoint.release(self)
    }

    /// The client left after the whole request was sent: the response is read
    /// and dropped so the connection can be reused, but no longer than the
    /// response timeout from now (the sweep closes it then, as for a late head).
    func drainForLeavingClient() -> Bool {
        exchange.drain(now: endpoint.pool.eventLoop.now)
        return true
    }

    /// A pooled connection the upstream had already closed (the keep-alive
    /// race): nothing of the response came back on it.
    func mayReplay(after error: UpstreamError) -> Bool {
        error == .connectionLost && exchanges > 1 && !exchange.bytesArrived
    }

    /// Bytes came from the upstream (before they are parsed).
    func receivedBytes() {
        exchange.bytesArrived = true
    }

    /// The exchange is abandoned (client gone, error): never reuse this connection.
    func abandon() {
        exchange.delegate = nil
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        exchange.inFlight = false
        endpoint.connectionClosed(self)
        channel.close(promise: nil)
    }

    /// Sweep: the response head is overdue, or a response that started went
    /// quiet for `responseTimeout` while the gateway was reading it (not
    /// paused for a slow client).
    func timedOut(now: NIODeadline) -> Bool {
        exchange.timedOut(now: now, readsPaused: handler.readsPaused)
    }

    /// Sweep: the exchange is given up.
    func responseTimedOut() {
        let d = exchange.delegate
        exchange.delegate = nil
        close()
        d?.upstreamFailed(.responseTimeout)
    }

    // MARK: from the channel handler

    func receivedInterim(_ head: UpstreamResponseHead) {
        exchange.delegate?.upstreamInterimHead(head)
    }

    func receivedHead(_ head: UpstreamResponseHead, keepAlive: Bool) {
        exchange.headArrived(keepAlive: keepAlive)
        let d = exchange.delegate
        d?.upstreamResponseHead(head)
    }

    func receivedBody(_ buffer: ByteBuffer) {
        exchange.quiet.progressed()
        let d = exchange.delegate
        d?.upstreamResponseBody(buffer)
    }

    /// `reusable`: false when bytes followed the response (the connection is closed after).
    func receivedEnd(reusable: Bool) {
        let d = exchange.delegate
        // Answered before the request body was sent: cannot be reused.
        let answeredEarly = exchange.responseEnded(reusable: reusable)
        if answeredEarly { close() }
        d?.upstreamResponseEnd()
        maybeRelease()
    }

    /// The handler refused the response: the close that follows reports `.invalidResponse`.
    var responseInvalid = false

    func channelClosed() {
        guard !isClosed else { return }
        isClosed = true
        exchange.inFlight = false
        endpoint.connectionClosed(self)
        let d = exchange.delegate
        exchange.delegate = nil
        if !exchange.responseDone { d?.upstreamFailed(responseInvalid ? .invalidResponse : .connectionLost) }
    }

    private func maybeRelease() {
        guard exchange.requestDone, exchange.responseDone, !isClosed else { return }
        let keepAlive = exchange.keepAlive
        exchange.delegate = nil
        exchange.inFlight = false
        if keepAlive {
            handler.readsPaused = false
            endpoint.release(self)
        } else {
            close()
        }
    }
}

extension UpstreamConnection.Exchange {
    mutating func requestSent(now: NIODeadline) {
        requestDone = true
        if !responseDone, responseDeadline == nil { responseDeadline = now + responseTimeout }
    }

    mutating func drain(now: NIODeadline) {
        draining = true
        let due = now + responseTimeout
        if responseDeadline.map({ $0 > due }) ?? true { responseDeadline = due }
    }

    mutating func headArrived(keepAlive: Bool) {
        // A drain deadline (the client left) stays: the body must come within it.
        if !draining { responseDeadline = nil }
        responseStarted = true
        quiet.progressed()
        self.keepAlive = keepAlive
    }

    /// True when the response came before the whole request was sent: the
    /// delegate is let go (the caller tells the one it read) and the
    /// connection must close.
    mutating func responseEnded(reusable: Bool) -> Bool {
        responseDone = true
        responseDeadline = nil
        if !reusable { keepAlive = false }
        guard !requestDone else { return false }
        delegate = nil
        return true
    }

    mutating func timedOut(now: NIODeadline, readsPaused: Bool) -> Bool {
        if let d = responseDeadline, d <= now { return true }
        return quiet.quietTooLong(
            now: now, timeout: responseTimeout, watching: responseStarted && !responseDone && !readsPaused)
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
