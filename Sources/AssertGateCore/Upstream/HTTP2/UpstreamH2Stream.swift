import CNGHTTP2
import NIOCore
import NIOHTTP1

/// One request's exchange on a multiplexed HTTP/2 upstream connection: what
/// the pipeline drives (`UpstreamExchange`) and the request body's source
/// for nghttp2 (`HTTP2DataSource`). Made by the pool when it grants a slot on
/// a connection; opened (a stream id) by `sendHead`. Loop-confined.
final class UpstreamH2Stream: UpstreamExchange, HTTP2DataSource {
    unowned let connection: UpstreamH2Connection
    var delegate: UpstreamExchangeDelegate?
    /// The client address the stream counts against (`maxConnectionsPerClient`).
    let client: String?
    /// Set by `sendHead`; 0 until then.
    private(set) var id: Int32 = 0
    private(set) var isClosed = false
    let responseTimeout: TimeAmount

    // Request body, queued for nghttp2's data provider.
    private var out: [(buffer: ByteBuffer, promise: EventLoopPromise<Void>?)] = []
    private var outEnded = false
    /// Promises whose bytes nghttp2 has taken: completed by the connection
    /// after `mem_send` returns (never inside nghttp2).
    private(set) var taken: [EventLoopPromise<Void>] = []

    // Response.
    private(set) var responseStarted = false
    private var responseEnded = false
    /// The client is slow: response bytes are not acknowledged (the stream's
    /// window stays shut) until it catches up.
    private(set) var paused = false
    /// Response bytes received while paused, acknowledged on resume.
    private var unacknowledged = 0
    /// Response-head deadline (set when the request is whole), for the sweep.
    var responseDeadline: NIODeadline?
    private var quiet = ResponseQuietWatch()

    init(connection: UpstreamH2Connection, delegate: UpstreamExchangeDelegate, client: String?, responseTimeout: TimeAmount) {
        self.connection = connection
        self.delegate = delegate
        self.client = client
        self.responseTimeout = responseTimeout
    }

    // MARK: UpstreamExchange

    func sendHead(_ head: consuming UpstreamHead, end: Bool) {
        guard id == 0, !isClosed else { return }
        guard case .http2(let h2) = consume head else { preconditionFailure("an HTTP/1.1 head for an HTTP/2 stream") }
        if end { outEnded = true }
        guard let opened = connection.open(self, head: h2, hasBody: !end) else {
            // No stream could be opened (the connection is going away): never sent.
            return closed(error: .refusedStream)
        }
        id = opened
        if end { armResponseDeadline() }
    }

    func sendBody(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard !isClosed, !outEnded else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        out.append((buffer, promise))
        connection.resume(self)
    }

    func sendTrailers(_ fields: HTTPHeaders) {
        guard !isClosed, !outEnded, id != 0 else { return }
        connection.setTrailers(self, fields)
    }

    func sendEnd() {
        guard !isClosed, !outEnded else { return }
        outEnded = true
        armResponseDeadline()
        connection.resume(self)
    }

    func pauseReads() { paused = true }

    func resumeReads() {
        guard paused else { return }
        paused = false
        let n = unacknowledged
        unacknowledged = 0
        if n > 0, !isClosed { connection.acknowledge(self, bytes: n) }
    }

    func releaseUnused() {
        delegate = nil
        abandon()
    }

    /// Nothing to drain for: resetting the stream costs the connection nothing.
    func drainForLeavingClient() -> Bool { false }

    func abandon() {
        delegate = nil
        guard !isClosed else { return }
        isClosed = true
        failTakenAndQueued()
        connection.cancel(self)
    }

    /// Refused unprocessed (GOAWAY, `REFUSED_STREAM`), or the connection was
    /// lost before any of the response came: the pipeline decides which
    /// requests go again (a lost connection: bodiless idempotent ones, once,
    /// as on a stale HTTP/1.1 connection; a dead idle connection is not
    /// pinged, so its first streams find out this way).
    func mayReplay(after error: UpstreamError) -> Bool {
        (error == .refusedStream || error == .connectionLost) && !responseStarted
    }

    private func armResponseDeadline() {
        if !responseStarted, responseDeadline == nil {
            responseDeadline = connection.eventLoop.now + responseTimeout
        }
    }

    // MARK: HTTP2DataSource (inside nghttp2: touches only this object and the connection's list)

    func readData(into buffer: UnsafeMutableRawBufferPointer) -> HTTP2DataRead {
        guard buffer.baseAddress != nil else { return .deferred }
        var written = 0
        while written < buffer.count, !out.isEmpty {
            var head = out[0].buffer
            written += head.moveBytes(into: buffer, at: written)
            if head.readableBytes == 0 {
                let done = out.removeFirst()
                if let p = done.promise {
                    if taken.isEmpty { connection.streamTookBytes(self) }
                    taken.append(p)
                }
            } else {
                out[0].buffer = head
            }
        }
        if out.isEmpty, outEnded { return .bytes(written, end: true, drained: false) }
        if written == 0 { return .deferred }
        return .bytes(written, end: false, drained: false)
    }

    /// Called by the connection after `mem_send`.
    func completeTaken() {
        let done = taken
        taken.removeAll()
        for p in done { p.succeed() }
    }

    private func failTakenAndQueued() {
        // Taken bytes did go out: their promises succeed; queued ones never will.
        completeTaken()
        let queued = out
        out.removeAll()
        for q in queued { q.promise?.fail(ChannelError.ioOnClosedChannel) }
    }

    // MARK: from the connection

    func receivedInterim(_ head: UpstreamResponseHead) {
        quiet.progressed()
        delegate?.upstreamInterimHead(head)
    }

    func receivedHead(_ head: UpstreamResponseHead, endStream: Bool) {
        responseStarted = true
        responseDeadline = nil
        quiet.progressed()
        var head = head
        head.endsStream = endStream
        delegate?.upstreamResponseHead(head)
        if endStream { receivedEnd() }
    }

    /// Returns the bytes to acknowledge now (0 while the client is slow).
    func receivedBody(_ buffer: ByteBuffer) -> Int {
        quiet.progressed()
        let n = buffer.readableBytes
        delegate?.upstreamResponseBody(buffer)
        // Nobody left to wait for, or a client keeping up: acknowledge now.
        if isClosed || !paused { return n }
        unacknowledged += n
        return 0
    }

    func receivedTrailers(_ fields: HTTPHeaders) {
        quiet.progressed()
        delegate?.upstreamResponseTrailers(fields)
    }

    func receivedEnd() {
        guard !responseEnded else { return }
        responseEnded = true
        responseDeadline = nil
        let d = delegate
        delegate = nil
        d?.upstreamResponseEnd()
        // Answered before the whole request went out (RFC 9113 §8.1 allows it,
        // and leaves the server's RST_STREAM optional): nothing more of the
        // request will be sent, so the stream is reset rather than left half
        // open for ever, holding its slot (and the HTTP/1.1 path's twin: the
        // connection is closed, `UpstreamConnection.receivedEnd`).
        if !isClosed, !outEnded || !out.isEmpty { abandon() }
    }

    /// nghttp2 closed the stream (or it never opened): a close before the
    /// response ended is a failure, told once.
    func closed(error: UpstreamError) {
        let wasClosed = isClosed
        isClosed = true
        failTakenAndQueued()
        guard !wasClosed, !responseEnded else { return }
        let d = delegate
        delegate = nil
        d?.upstreamFailed(error)
    }

    // MARK: sweep

    /// The response head is overdue, or a started response went quiet for
    /// `responseTimeout` while the gateway was reading it.
    func timedOut(now: NIODeadline) -> Bool {
        if let d = responseDeadline, d <= now { return true }
        return quiet.quietTooLong(now: now, timeout: responseTimeout, watching: responseStarted && !responseEnded && !paused)
    }

    func responseTimedOut() {
        let d = delegate
        delegate = nil
        abandon()
        d?.upstreamFailed(.responseTimeout)
    }
}
