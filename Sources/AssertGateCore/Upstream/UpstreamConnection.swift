import GatewayTLS
import NIOCore
import NIOHTTP1

/// Receives one exchange's events. All calls on the worker's event loop.
protocol UpstreamExchangeDelegate: AnyObject {
    func upstreamLeased(_ exchange: any UpstreamExchange)
    func upstreamLeaseFailed(_ error: UpstreamError)
    /// The head's bytes are the parser's: read them before returning.
    func upstreamResponseHead(_ head: UpstreamResponseHead)
    func upstreamResponseBody(_ buffer: ByteBuffer)
    /// Trailer fields from an HTTP/2 upstream, before `upstreamResponseEnd`.
    func upstreamResponseTrailers(_ fields: HTTPHeaders)
    func upstreamResponseEnd()
    /// The exchange failed after the lease (before or during the response).
    func upstreamFailed(_ error: UpstreamError)
}

/// One HTTP/1.1 keep-alive connection to an endpoint, loop-confined.
final class UpstreamConnection: UpstreamExchange {
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
        self.quiet.reset()
        endpoint.pool.trackInflight(self)
    }

    /// Body framing of the current exchange (chunk headers are added here).
    private var chunked = false

    func sendHead(_ head: UpstreamHead, end: Bool) {
        guard case .http1(let head) = head else {
            preconditionFailure("an HTTP/2 head for an HTTP/1.1 connection")
        }
        chunked = head.chunked
        if end, chunked {
            handler.writeHead(head, flush: false)
            sendEnd()
            return
        }
        // One pipeline traversal (writeAndFlush) instead of a write and a flush.
        handler.writeHead(head, flush: true)
        if end { requestSent() }
    }

    func sendBody(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        if chunked {
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
        if chunked { handler.writeLastChunk() }
        handler.flush()
        requestSent()
    }

    /// The whole request is on its way: the response deadline starts.
    private func requestSent() {
        requestDone = true
        if !responseDone, responseDeadline == nil {
            responseDeadline = channel.eventLoop.now + responseTimeout
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
    func drainForLeavingClient() -> Bool {
        draining = true
        let due = channel.eventLoop.now + responseTimeout
        if responseDeadline.map({ $0 > due }) ?? true { responseDeadline = due }
        return true
    }

    /// A pooled connection the upstream had already closed (the keep-alive
    /// race): nothing of the response came back on it.
    func mayReplay(after error: UpstreamError) -> Bool {
        error == .connectionLost && exchanges > 1 && !responseStarted
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
        quiet.progressed()
        responseKeepAlive = keepAlive
        delegate?.upstreamResponseHead(head)
    }

    func receivedBody(_ buffer: ByteBuffer) {
        quiet.progressed()
        delegate?.upstreamResponseBody(buffer)
    }

    private var quiet = ResponseQuietWatch()

    /// Sweep (every 100 ms): a response that started and then went quiet for
    /// `responseTimeout` while the gateway was reading it (not paused for a
    /// slow client).
    func responseStalled(now: NIODeadline) -> Bool {
        quiet.quietTooLong(now: now, timeout: responseTimeout, watching: responseStarted && !responseDone && !handler.readsPaused)
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
