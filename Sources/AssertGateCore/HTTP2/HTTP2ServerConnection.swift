import CNGHTTP2
import Logging
import NIOCore
import NIOHTTP1
import Verifier

/// The HTTP/2 front end: a channel handler around an `HTTP2Session`.
///
/// It moves bytes between the socket and the session (one buffer per flush,
/// batching frames of all streams into one write), acts on the session's
/// events once nghttp2 has returned (requests into `RequestPipeline`, body
/// and window accounting), and keeps what nghttp2 does not: the abuse
/// budgets, the header clock of the connection's timeouts, and the watch on
/// responses a client stops taking.
final class HTTP2ServerConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var session: HTTP2Session?
    let worker: Worker
    /// The worker's, kept here: each queued response chunk counts in it.
    let responseQueue: ResponseQueueBudget
    let scheme: String
    /// The connection's timeouts (nil in tests that build a bare pipeline):
    /// told when a header block begins and ends, for `headerTimeout`.
    private let timeouts: ConnectionTimeoutHandler?
    private var context: ChannelHandlerContext?
    private(set) var allocator = ByteBufferAllocator()
    private var streams: HTTP2StreamTable {
        _read { yield streamTable.value }
        _modify { yield &streamTable.value }
    }
    /// An `UncheckedCell`: a request's half-dozen lookups carry no runtime
    /// exclusivity check. The table's methods call out to nothing (a stream
    /// made or recycled is only stored), and what a caller does with the
    /// stream it got happens after the access ends.
    private let streamTable = UncheckedCell(HTTP2StreamTable())
    /// The session's events not yet acted on.
    private let events = HTTP2EventQueue()
    private var inRead = false
    private var flushScheduled = false
    private var selfBound: NIOLoopBound<HTTP2ServerConnection>?
    /// The channel and its loop, kept from `handlerAdded`: each flush asks
    /// both, and `context.channel`/`context.eventLoop` go through the pipeline.
    private var channel: Channel?
    private var eventLoop: EventLoop?
    /// The scheduled flush, made once: a task per event-loop pass, not a closure allocated for each.
    private var flushTask: (@Sendable () -> Void)?
    private var clientAddress: String?
    /// Requests whose pipeline has not finished (reset streams included).
    private(set) var activeRequests = 0
    private var goingAway = false
    private var closing = false
    /// A reset of ours went over its budget: acted on once the events at hand are.
    private var serverResetsExhausted = false

    // Abuse nghttp2 1.52 does not account for.
    private var emptyDataBudget = TokenBucket(perSecond: 10, burst: 100)
    private var settingsBudget = TokenBucket(perSecond: 10, burst: 50)
    private var pingBudget = TokenBucket(perSecond: 10, burst: 50)
    private var serverResetBudget = TokenBucket(perSecond: 50, burst: 200)
    /// Client RST_STREAMs (rapid reset). nghttp2's own limiter only covers some stream
    /// states in 1.52, so this one counts every RST_STREAM frame.
    private lazy var clientResetBudget = TokenBucket(
        perSecond: limits.streamResetRate.perSecond, burst: limits.streamResetRate.burst)

    private var limits: LimitsConfig { worker.snapshot.config.limits }
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` as sent when the connection
    /// started: a client within it is not refused after a reload lowers the
    /// limit (new connections get the new one).
    private var advertisedMaxStreams = Int.max

    /// nghttp2 refuses an oversized field as soon as it reads the field's length,
    /// often within the first HEADERS frame (16 KiB): a block refused after this
    /// many bytes is counted as too large; a short one as corrupt HPACK.
    static let oversizedBlockBytes = 4 << 10

    init(worker: Worker, scheme: String, timeouts: ConnectionTimeoutHandler? = nil) {
        self.worker = worker
        self.responseQueue = worker.responseQueue
        self.scheme = scheme
        self.timeouts = timeouts
    }

    /// The session's settings for the limits in force when the connection starts.
    static func sessionSettings(_ l: LimitsConfig) -> HTTP2Session.Settings {
        HTTP2Session.Settings(
            maxConcurrentStreams: l.maxConcurrentStreams, maxHeaderListBytes: l.maxHeaderListBytes,
            streamResetBurst: l.streamResetRate.burst, streamResetPerSecond: l.streamResetRate.perSecond)
    }

    // MARK: lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.allocator = context.channel.allocator
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.selfBound = bound
        self.channel = context.channel
        self.eventLoop = context.eventLoop
        self.flushTask = { bound.value.flushNow() }
        self.clientAddress = context.channel.remoteAddress?.ipAddress
        do {
            let settings = Self.sessionSettings(limits)
            advertisedMaxStreams = settings.maxConcurrentStreams
            session = try HTTP2Session.server(settings, allocator: allocator)
        } catch {
            worker.logger.error("nghttp2 session creation failed", metadata: ["error": "\(error)"])
            context.close(promise: nil)
            return
        }
        flushNow()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopStallWatch()
        abortAll()
        session = nil  // frees the nghttp2 session
        self.context = nil
        self.selfBound = nil
        self.channel = nil
        self.eventLoop = nil
        self.flushTask = nil  // it holds this handler
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopStallWatch()
        abortAll()
        context.fireChannelInactive()
    }

    private func abortAll() {
        for s in streams.removeAll() {
            s.isClosed = true
            s.dropQueuedOutput()
            s.pipeline?.downstreamAborted()
        }
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session, !closing else { return }
        inRead = true
        do {
            try session.feed(unwrapInboundIn(data), into: &events.pending)
        } catch {
            // Bad preface, flood detected by nghttp2, …: nghttp2 queued a GOAWAY if it could.
            worker.logger.debug("h2 session error", metadata: ["code": "\(error.code)"])
            closeAfterFlush()
        }
        processEvents()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inRead = false
        flushNow()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableSince = nil
            flushNow()
        } else {
            unwritableSince = .now()
            watchForStalledWrites()
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            initiateGoAway()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    /// Graceful shutdown: GOAWAY(NO_ERROR) with the last processed stream; close when drained.
    func initiateGoAway() {
        guard let session, !goingAway else { return }
        goingAway = true
        session.goAway()
        scheduleFlush()
    }

    private func enhanceYourCalm() {
        guard let session, !closing else { return }
        worker.logger.info("h2 abuse, GOAWAY(ENHANCE_YOUR_CALM)", metadata: ["peer": "\(clientAddress ?? "?")"])
        session.terminate(errorCode: NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        closeAfterFlush()
    }

    private func closeAfterFlush() {
        closing = true
        scheduleFlush()
    }

    /// Charges one event to `budget`; an exhausted budget ends the connection.
    private func charge(_ budget: inout TokenBucket) {
        if !budget.take() { enhanceYourCalm() }
    }

    // MARK: events (after nghttp2 has returned)

    private func processEvents() {
        if !events.isEmpty { events.process { handle($0) } }
        if serverResetsExhausted {
            serverResetsExhausted = false
            enhanceYourCalm()
        }
    }

    private func handle(_ event: consuming HTTP2Session.Event) {
        switch consume event {
        case .headerBlockStarted:
            // Request heads and trailers alike: the block must complete in time.
            timeouts?.requestHeadStarted()
        case .headerBlockEnded:
            timeouts?.requestHeadReceived()
        case .head(let id, let head, let endStream):
            startRequest(openStream(id), head, endStream: endStream)
        case .headTooLarge(let id, let head):
            // Only its pseudo-headers were kept: the id is the gateway's own.
            openStream(id).refuseHead(
                Rejection(.headersTooLarge, "header list over limits.maxHeaderListBytes"), requestId: worker.requestIds.make(), method: head.method ?? "",
                target: head.path ?? "", contentType: head.fieldList.first { $0.0 == "content-type" }?.1, observer: worker.observer)
        case .data(let id, let buffer):
            if let p = streams.lookup(id)?.pipeline {
                p.receiveBody(buffer)
            } else {
                consume(streamId: id, bytes: buffer.readableBytes)
            }
        case .trailers(let id, let fields):
            streams.lookup(id)?.pipeline?.receiveTrailers(fields)
        case .end(let id):
            streams.lookup(id)?.pipeline?.receiveEnd()
        case .closed(let id, _):
            guard var stream = streams.close(id), let p = stream.pipeline else { return }
            p.downstreamAborted()
            streams.recycle(&stream)
        case .drained(let id):
            streams.lookup(id)?.pipeline?.downstreamDrained()
        case .trailersTooLarge:
            // nghttp2 resets the stream (its pipeline reports it); count it as a server reset.
            charge(&serverResetBudget)
        case .emptyDataReceived:
            charge(&emptyDataBudget)
        case .settingsReceived:
            // The first is the client's preface: the connection has shown its
            // protocol, and only idleness (or a slow head) closes it from now.
            timeouts?.markEstablished()
            charge(&settingsBudget)
        case .pingReceived:
            charge(&pingBudget)
        case .resetReceived, .resetForPeerError:
            // A reset the client made nghttp2 send costs what one it sent does.
            charge(&clientResetBudget)
        case .goAwayReceived, .pingAcked, .response, .responseInvalid, .interim:
            break  // a client's GOAWAY: its open streams finish; the close follows (responses: client sessions only)
        }
    }

    /// The stream a complete head opens for the gateway.
    private func openStream(_ id: Int32) -> HTTP2Stream {
        streams.open(id, connection: self)
    }

    private func startRequest(_ stream: HTTP2Stream, _ head: HTTP2HeaderBlock, endStream: Bool) {
        if closing { return }
        if activeRequests >= advertisedMaxStreams {
            // Reset streams whose upstream work is still running count too.
            resetStream(stream, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
            return
        }
        guard let method = head.method, let path = head.path else {
            resetStream(stream, errorCode: NGHTTP2_PROTOCOL_ERROR.rawValue)
            return
        }
        if method == "CONNECT" {
            resetStream(stream, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
            return
        }
        let (request, body, refusal) = RequestIntake.accept(
            method: method, target: path, authority: head.authority, headers: head.fields,
            wire: .http2(endStream: endStream), scheme: scheme, clientAddress: clientAddress, worker: worker,
            mayHaveHost: head.hasHost)
        // Handed over, not copied: the request's strings and fields have one owner.
        let pipeline = RequestPipeline(
            request: consume request, body: body, sink: stream, worker: worker, refusal: consume refusal)
        stream.pipeline = pipeline
        activeRequests += 1
        pipeline.start()
    }

    func requestFinished() {
        activeRequests -= 1
        if goingAway { scheduleFlush() }
    }

    // MARK: sink operations (called by HTTP2Stream, never from a callback)

    /// A response the gateway made itself (its headers are sent as they are).
    func submitResponse(_ stream: HTTP2Stream, status: Int, headers: HTTPHeaders, endStream: Bool) {
        guard let session else { return }
        do {
            try session.submitResponse(stream.id, status: status, headers: headers, body: endStream ? nil : stream)
        } catch {
            submitFailed(stream, error)
        }
        scheduleFlush()
    }

    /// An upstream's head, encoded straight from its parsed bytes.
    func submitUpstreamResponse(_ stream: HTTP2Stream, head: UpstreamResponseHead, requestId: String) {
        guard let session else { return }
        do {
            try session.submitUpstreamResponse(
                stream.id, head: head, requestId: requestId, body: head.endsStream ? nil : stream)
        } catch {
            submitFailed(stream, error)
        }
        scheduleFlush()
    }

    /// A 1xx HEADERS frame before the stream's response; nothing ends.
    func submitInterimHead(_ stream: HTTP2Stream, head: UpstreamResponseHead) {
        guard let session else { return }
        do {
            try session.submitInterimHead(stream.id, head: head)
        } catch {
            // nghttp2 refused it (a status it will not send before a response): dropped.
            worker.logger.debug("submit of an interim head failed", metadata: ["code": "\(error.code)"])
        }
        scheduleFlush()
    }

    /// Trailers to follow the stream's body (sent when its end is taken).
    func setTrailers(_ stream: HTTP2Stream, _ fields: HTTPHeaders) {
        session?.setTrailers(stream.id, fields)
    }

    private func submitFailed(_ stream: HTTP2Stream, _ error: HTTP2SessionError) {
        worker.logger.debug("submit_response failed", metadata: ["code": "\(error.code)"])
        resetStream(stream, errorCode: NGHTTP2_INTERNAL_ERROR.rawValue)
    }

    // MARK: stalled writes (limits.streamWriteTimeout)

    private var stallWatch: RepeatedTask?
    /// When the socket last stopped accepting writes, while it still does not.
    private var unwritableSince: NIODeadline?

    /// A stream has response bytes queued: watch for a client that never takes them.
    func watchForStalledWrites() {
        guard stallWatch == nil, let context, let selfBound else { return }
        let timeout = limits.streamWriteTimeout
        // The fewest bytes a stream with bytes queued must take over each `timeout`.
        let minBytes = Int(clamping: Int64(Double(limits.minResponseRate) * Double(timeout.nanoseconds) / 1e9))
        let tick = max(TimeAmount.milliseconds(50), min(.seconds(1), .nanoseconds(timeout.nanoseconds / 4)))
        stallWatch = context.eventLoop.scheduleRepeatedTask(initialDelay: tick, delay: tick) { _ in
            selfBound.value.checkStalledWrites(timeout: timeout, minBytes: minBytes)
        }
    }

    private func checkStalledWrites(timeout: TimeAmount, minBytes: Int) {
        guard let context, context.channel.isActive else {
            stopStallWatch()
            return
        }
        let now = NIODeadline.now()
        if let since = unwritableSince, since + timeout <= now {
            // The client stopped reading the socket: nothing for any stream can leave.
            worker.observer?.timedOut(.streamWrite)
            context.close(promise: nil)
            return
        }
        var waiting = false
        var stalled: [HTTP2Stream] = []
        // Quiet time is counted from the first tick that saw no progress: a
        // stall is found within one tick (a quarter of the timeout) of it.
        // And a stream with bytes queued must take at least
        // `limits.minResponseRate` a second over each `timeout`: a client
        // opening its window a byte every few seconds never looks quiet, and
        // held its upstream connection for ever.
        for stream in streams.openStreams where !stream.isClosed {
            if minBytes > 0, stream.takesTooSlowly(now: now, window: timeout, minBytes: minBytes) {
                stalled.append(stream)
                continue
            }
            guard stream.outBytes > 0 else { continue }
            if stream.outputProgress != stream.progressAtLastCheck {
                stream.progressAtLastCheck = stream.outputProgress
                stream.quietSince = now
                waiting = true
            } else if let since = stream.quietSince, since + timeout <= now {
                stalled.append(stream)
            } else if stream.quietSince != nil, responseQueue.isOver {
                // Past the worker's budget (limits.maxQueuedResponseBytes) a
                // tick without progress is enough, stream by stream until the
                // worker is back within it.
                stream.dropQueuedOutput()
                stalled.append(stream)
            } else {
                if stream.quietSince == nil { stream.quietSince = now }
                waiting = true
            }
        }
        for stream in stalled {
            // Its flow-control window stayed shut: reset it, and end its request now
            // (the close event comes only once the RST_STREAM is written).
            worker.observer?.timedOut(.streamWrite)
            stream.dropQueuedOutput()
            resetStream(stream, errorCode: NGHTTP2_CANCEL.rawValue)
            stream.pipeline?.downstreamAborted()
        }
        if !waiting { stopStallWatch() }
    }

    private func stopStallWatch() {
        stallWatch?.cancel()
        stallWatch = nil
    }

    func resumeIfDeferred(_ stream: HTTP2Stream) {
        guard let session, !stream.isClosed, session.resume(stream.id) else { return }
        scheduleFlush()
    }

    func resetStream(_ stream: HTTP2Stream, errorCode: UInt32) {
        guard let session, !stream.isClosed else { return }
        session.reset(stream.id, errorCode: errorCode)
        if !serverResetBudget.take() { serverResetsExhausted = true }
        scheduleFlush()
    }

    func consume(streamId: Int32, bytes: Int) {
        guard let session, bytes > 0 else { return }
        session.consume(streamId, bytes: bytes)
        scheduleFlush()
    }

    // MARK: output

    private func scheduleFlush() {
        if inRead || flushScheduled { return }
        guard let eventLoop, let flushTask else { return }
        flushScheduled = true
        eventLoop.execute(flushTask)
    }

    /// Drains the session into one buffer and writes it with one flush.
    func flushNow() {
        flushScheduled = false
        // After channelInactive the streams the session reads from are aborted:
        // never run nghttp2 output on a dead connection.
        guard let context, let session, let channel, channel.isActive else { return }
        // Nothing to act on or send and the session goes on (the flush after a
        // read that only took frames in): what the rounds below would find.
        if events.isEmpty, !serverResetsExhausted, !closing, !goingAway, session.wantsRead, !session.wantsWrite { return }
        // Once the socket has taken the last flush's buffer this is its only
        // reference, and the session writes into it without allocating.
        var out = spareOutput.take()
        out?.clear()
        var rounds = 0
        var more = false
        repeat {
            rounds += 1
            processEvents()
            more = drain(session, channel, into: &out)
        } while !events.isEmpty && rounds < 8
        // Left only when the rounds ran out (a drain records no reset of ours).
        if !events.isEmpty || serverResetsExhausted { processEvents() }
        // want_read first: the cheaper question, and it settles the usual case.
        let finished =
            closing
            || ((!session.wantsRead || (goingAway && !session.hasOpenStreams && activeRequests == 0))
                && !session.wantsWrite)
        if finished {
            reportFailedHeaderBlock(session)
            closing = true
            if let out, out.readableBytes > 0 {
                context.writeAndFlush(wrapOutboundOut(out)).whenComplete { _ in channel.close(promise: nil) }
            } else {
                context.close(promise: nil)
            }
            return
        }
        if let written = out, written.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(written), promise: nil)
        }
        // Kept for the next flush, unless a big one grew it: an idle
        // connection does not hold a megabyte for the rest of its life.
        spareOutput = out.flatMap { $0.capacity <= Self.maxSpareOutput ? $0 : nil }
        if more, channel.isWritable { scheduleFlush() }
    }

    /// The last flush's output buffer, for the next one (see `flushNow`).
    private var spareOutput: ByteBuffer?
    static let maxSpareOutput = 64 << 10

    /// True when output is left because the per-flush cap was reached.
    private func drain(_ session: HTTP2Session, _ channel: Channel, into out: inout ByteBuffer?) -> Bool {
        // Nothing queued (the flush after a read that only took frames in, the
        // last round of a drain): no pass through nghttp2's sender.
        guard session.wantsWrite else { return false }
        // A client that stopped reading (but granted a large window) must not make us move
        // every queued byte into the socket's buffer: wait for writability, so the stream
        // queues fill and the upstreams are paused instead.
        guard channel.isWritable else { return true }
        do {
            return try session.drain(into: &out, events: &events.pending)
        } catch {
            closing = true
            return false
        }
    }

    /// The session is ending with a request's header block unfinished: nghttp2
    /// refused the block for the whole connection. Its HPACK decoder takes no
    /// field over 64 KiB (a compile-time limit) and fails the connection with
    /// COMPRESSION_ERROR, so such a field cannot be answered per stream; it is
    /// still counted and logged, as `headers-too-large` when the block had
    /// passed our limit or was that large on the wire, else as
    /// `malformed-request` (corrupt HPACK).
    private func reportFailedHeaderBlock(_ session: HTTP2Session) {
        guard let unfinished = session.takeUnfinishedHead() else { return }
        let head = unfinished.head
        let reason: ReasonToken =
            unfinished.overLimit || unfinished.wireBytes >= Self.oversizedBlockBytes ? .headersTooLarge : .malformedRequest
        worker.observer?.requestFinished(
            .refusedHead(
                requestId: worker.requestIds.make(), method: head.method ?? "", target: head.path ?? "",
                status: 0, reason: reason))
    }
}
