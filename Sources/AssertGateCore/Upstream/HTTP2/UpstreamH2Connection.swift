import CNGHTTP2
import GatewayTLS
import Logging
import NIOCore
import NIOHTTP1

/// One HTTP/2 connection to an `h2c://` or `h2://` endpoint: the channel's
/// last handler, owning an nghttp2 client session (`HTTP2Session.client`),
/// carrying up to `capacity` streams at once. It moves bytes between the
/// socket and the session and hands each stream its events; the pool
/// decides which connection a request gets. Loop-confined.
///
/// Flow control: the connection's window opens as bytes arrive, a stream's
/// only as its client takes them, so a slow client holds back its own
/// stream and nobody else's. GOAWAY: no new stream goes here; those the
/// server never processed are refused (`UpstreamError.refusedStream`) and
/// the pipeline sends them again on another connection.
final class UpstreamH2Connection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let session: HTTP2Session
    unowned let endpoint: H2EndpointPool
    let eventLoop: EventLoop
    /// The TLS settings the connection was verified with (nil: cleartext).
    let tls: UpstreamTLS?
    private let maxStreams: Int
    private var context: ChannelHandlerContext?
    private var streams = H2StreamTable<UpstreamH2Stream>()
    /// Slots granted (streams open, or about to be): what the pool counts.
    private(set) var granted = 0
    /// The connection is registered with the pool (the handshake is done).
    var isReady = false
    /// The server's first SETTINGS frame has arrived. Until then its stream
    /// limit is unknown (nghttp2 assumes ours), so the connection takes one
    /// stream: a burst granted 100 streams at once was refused past a
    /// smaller limit, and the replays went the same way.
    private(set) var settingsSeen = false
    /// A GOAWAY came, a reload retired it, or stream ids ran out: no new stream.
    private(set) var goingAway = false
    private(set) var isClosed = false
    /// `close()` was called; the channel may still be writing close_notify.
    private var closing = false
    private let events = HTTP2EventQueue()
    private var flushScheduled = false
    /// Streams whose body bytes nghttp2 took during the last drain.
    private var tookBytes: [UpstreamH2Stream] = []

    // Liveness (the sweep): reads counted, not timed, on the read path.
    private var quiet = ResponseQuietWatch()
    private var pingSentAt: NIODeadline?
    var idleSince: NIODeadline

    init(session: HTTP2Session, endpoint: H2EndpointPool, eventLoop: EventLoop, tls: UpstreamTLS?, maxStreams: Int) {
        self.session = session
        self.endpoint = endpoint
        self.eventLoop = eventLoop
        self.tls = tls
        self.maxStreams = max(1, maxStreams)
        self.idleSince = eventLoop.now
    }

    /// Streams this connection may carry at once: ours and the server's limit.
    var capacity: Int { settingsSeen ? min(maxStreams, session.remoteMaxConcurrentStreams) : 1 }
    var hasRoom: Bool { isReady && !goingAway && !closing && !isClosed && granted < capacity }
    var isIdle: Bool { granted == 0 }

    // MARK: slots

    func grant(delegate: UpstreamExchangeDelegate, client: String?, responseTimeout: TimeAmount) -> UpstreamH2Stream {
        granted += 1
        return UpstreamH2Stream(connection: self, delegate: delegate, client: client, responseTimeout: responseTimeout)
    }

    /// A slot is free again (once per stream).
    private func release(_ stream: UpstreamH2Stream) {
        granted -= 1
        if granted == 0 { idleSince = eventLoop.now }
        endpoint.streamEnded(on: self, client: stream.client)
    }

    /// Opens `stream` with `head`; nil when the session refuses (ids exhausted,
    /// GOAWAY received): the slot is released and the stream is told.
    func open(_ stream: UpstreamH2Stream, head: UpstreamH2Head, hasBody: Bool) -> Int32? {
        guard !isClosed, !closing, !goingAway else {
            release(stream)
            return nil
        }
        do {
            let id = try session.submitRequest(head, body: hasBody ? stream : nil)
            streams.insert(stream, id: id)
            scheduleFlush()
            return id
        } catch {
            // Stream ids exhausted or the session is ending: retire this connection.
            retire()
            release(stream)
            return nil
        }
    }

    /// The stream is given up (client gone, timeout): RST_STREAM(CANCEL), or
    /// only the slot back when it never opened. The slot frees when nghttp2
    /// closes the stream.
    func cancel(_ stream: UpstreamH2Stream) {
        guard stream.id != 0, streams[stream.id] != nil else {
            if stream.id == 0 { release(stream) }
            return
        }
        session.reset(stream.id, errorCode: NGHTTP2_CANCEL.rawValue)
        scheduleFlush()
    }

    func resume(_ stream: UpstreamH2Stream) {
        guard stream.id != 0 else { return }
        if session.resume(stream.id) { scheduleFlush() }
    }

    func setTrailers(_ stream: UpstreamH2Stream, _ fields: HTTPHeaders) {
        session.setTrailers(stream.id, fields)
    }

    func acknowledge(_ stream: UpstreamH2Stream, bytes: Int) {
        session.consumeStream(stream.id, bytes: bytes)
        scheduleFlush()
    }

    /// Called from a data source inside nghttp2: only remembers the stream.
    func streamTookBytes(_ stream: UpstreamH2Stream) {
        tookBytes.append(stream)
    }

    /// No new streams; closes once the last one ends.
    func retire() {
        guard !goingAway else { return }
        goingAway = true
        endpoint.connectionRetired(self)
        if granted == 0 { close() }
    }

    func close() {
        guard !isClosed else { return }
        // Over TLS the channel closes only once close_notify is out (up to
        // 2 s): no stream is granted or opened on it meanwhile.
        closing = true
        context?.close(promise: nil)
    }

    // MARK: channel

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        flushTask = { bound.value.flush() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        flushTask = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        // The preface and SETTINGS (a TLS handler in front holds them until its handshake is done).
        flush()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        quiet.progressed()
        do {
            try session.feed(bytes, into: &events.pending)
        } catch {
            endpoint.pool.logger.debug("upstream HTTP/2 session error", metadata: ["endpoint": "\(endpoint.endpoint)", "code": "\(error.code)"])
            handleEvents()
            flush()
            context.close(promise: nil)
            return
        }
        handleEvents()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writable = context.channel.isWritable
        if writable { flush() }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard !isClosed else { return }
        isClosed = true
        for s in streams.removeAllInOrder() {
            release(s)
            s.closed(error: .connectionLost)
        }
        endpoint.connectionClosed(self)
        context.fireChannelInactive()
    }

    // MARK: bytes out

    private func scheduleFlush() {
        guard !flushScheduled, !isClosed, let task = flushTask else { return }
        flushScheduled = true
        eventLoop.execute(task)
    }

    /// Made once while the handler is in the pipeline: scheduling a flush
    /// (once or twice per request) then allocates no closure. It holds the
    /// connection, so `handlerRemoved` lets it go.
    private var flushTask: (@Sendable () -> Void)?

    /// The channel's writability as last reported (a new channel is
    /// writable): asking the channel costs a call through `Channel` per drain.
    private var writable = true
    /// The buffer of the last flush, refilled by the next one: once the socket
    /// has taken its bytes it is unique again, so a flush allocates nothing
    /// (a buffer still held by a pending write is copied on write, as ever).
    /// One grown by a large drain is let go rather than kept per connection.
    private var spareOut: ByteBuffer?
    private static let maxSpareOut = 64 << 10

    /// Moves what nghttp2 has to send to the socket (while it takes it), then
    /// completes the write promises of the body bytes nghttp2 took.
    private func flush() {
        flushScheduled = false
        guard let context, !isClosed else { return }
        var wrote = false
        // After most reads nghttp2 has nothing to send: its sender is not asked.
        while !isClosed, session.wantsWrite, writable {
            var out = spareOut.take()
            out?.clear()
            let more: Bool
            do {
                more = try session.drain(into: &out, events: &events.pending)
            } catch {
                context.close(promise: nil)
                return
            }
            if let out, out.readableBytes > 0 {
                context.write(wrapOutboundOut(out), promise: nil)
                wrote = true
            }
            if let out, out.capacity <= Self.maxSpareOut { spareOut = out }
            handleEvents()
            if !more { break }
        }
        if wrote, !isClosed { context.flush() }
        if !tookBytes.isEmpty {
            let took = tookBytes
            tookBytes.removeAll(keepingCapacity: true)
            for s in took { s.completeTaken() }
        }
        if !isClosed, !session.wantsRead, !session.wantsWrite { context.close(promise: nil) }
    }

    // MARK: events

    private func handleEvents() {
        events.process { handle($0) }
    }

    /// Owns the event (as the front end's `handle` does): a response head's
    /// fields are taken, not copied, and nothing is destroyed twice.
    private func handle(_ event: consuming HTTP2Session.Event) {
        switch consume event {
        case .interim(let id, let head):
            streams[id]?.receivedInterim(head)
        case .response(let id, let head, let endStream):
            streams[id]?.receivedHead(head, endStream: endStream)
        case .headTooLarge(let id, _), .responseInvalid(let id):
            // The answer cannot be forwarded whole (or at all): the stream fails.
            if let s = streams[id] {
                session.reset(id, errorCode: NGHTTP2_INTERNAL_ERROR.rawValue)
                s.closed(error: .invalidResponse)
                scheduleFlush()
            }
        case .data(let id, let buffer):
            let n = buffer.readableBytes
            session.consumeConnection(bytes: n)
            if let s = streams[id] {
                let ack = s.receivedBody(buffer)
                if ack > 0 { session.consumeStream(id, bytes: ack) }
            }
        case .trailers(let id, let fields):
            streams[id]?.receivedTrailers(fields)
        case .end(let id):
            streams[id]?.receivedEnd()
        case .closed(let id, let errorCode):
            guard let s = streams.remove(id) else { return }
            release(s)
            s.closed(error: errorCode == NGHTTP2_REFUSED_STREAM.rawValue ? .refusedStream : .streamReset(errorCode))
            if goingAway, granted == 0 { close() }
        case .goAwayReceived(let lastStreamId, let errorCode):
            endpoint.pool.logger.debug(
                "upstream GOAWAY",
                metadata: ["endpoint": "\(endpoint.endpoint)", "lastStreamId": "\(lastStreamId)", "code": "\(errorCode)"])
            retire()
        case .pingAcked:
            pingSentAt = nil
        case .settingsReceived:
            // The first tells the real limit; a later one may raise it.
            settingsSeen = true
            endpoint.roomChanged(on: self)
        case .head, .headerBlockStarted, .headerBlockEnded, .drained, .trailersTooLarge, .pingReceived,
            .emptyDataReceived, .resetReceived, .resetForPeerError:
            break
        }
    }

    // MARK: sweep

    /// Response timeouts of the streams; a PING when open streams have heard
    /// nothing for half the response timeout, and the connection closed when
    /// no ACK (or anything) comes within `pingTimeout`.
    func sweep(now: NIODeadline, responseTimeout: TimeAmount, pingTimeout: TimeAmount) {
        var late: [UpstreamH2Stream] = []
        for s in streams.all where s.timedOut(now: now) { late.append(s) }
        for s in late { s.responseTimedOut() }
        let pingDue = quiet.quietTooLong(
            now: now, timeout: .nanoseconds(responseTimeout.nanoseconds / 2), watching: !streams.isEmpty && !isClosed)
        // Something arrived (an ACK included), or nothing to wait for.
        guard quiet.isQuiet else {
            pingSentAt = nil
            return
        }
        if let sent = pingSentAt {
            if sent + pingTimeout <= now {
                endpoint.pool.logger.warning("upstream HTTP/2 connection unresponsive (no PING ACK)", metadata: ["endpoint": "\(endpoint.endpoint)"])
                close()
            }
        } else if pingDue {
            pingSentAt = now
            session.ping()
            scheduleFlush()
        }
    }
}
