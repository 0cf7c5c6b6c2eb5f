import NIOCore
import NIOHTTP1
import Verifier

/// The HTTP/1.1 front: one request at a time (NIO's pipelining handler
/// serialises pipelined requests), request and response bodies streamed with
/// back-pressure by holding `read()`.
final class HTTP1ServerHandler: ChannelDuplexHandler, ResponseSink {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let worker: Worker
    private let scheme: String
    private var context: ChannelHandlerContext?
    private var clientAddress: String?
    private var pipeline: RequestPipeline?
    private var keepAlive = true
    private var responding = false
    private var discardingRequest = false
    /// The current request's `.end` has been read.
    private var requestComplete = true
    private var requestHasBody = false
    /// The request said HTTP/1.0: no chunked framing may answer it (RFC 9112 §6.1).
    private var requestIsHTTP10 = false
    /// A response head written and not flushed: flushed at the end of the
    /// event-loop pass unless body or end (which flush) came in it, so a
    /// head followed by silence (server-sent events, a long poll) reaches
    /// the client at once, and a head with its body is still one write.
    private var headUnflushed = false
    private var flushHeadTask: (@Sendable () -> Void)?
    /// Request body bytes handed to the pipeline and not yet taken upstream.
    private var unconsumed = 0
    private var readsPaused = false
    private var pendingRead = false
    /// An `Upgrade` request: NIO's parser reads nothing after it (its body
    /// included), and every byte read would pile up unparsed. From its end
    /// on reads stay off; the connection closes after the answer.
    private var upgradeRequested = false
    private var parserStopped: Bool { upgradeRequested && requestComplete }
    /// Answered and closing while the client is still sending its body: the
    /// rest is read and dropped (bounded) so the close does not turn into a
    /// TCP reset that destroys the answer before the client reads it.
    private var lingering = false

    static let lingerTimeout: TimeAmount = .seconds(2)

    /// A request NIO's pipelining handler delivered while the one before was
    /// writing its end, before that one finished (it hands the next request
    /// over from inside that write). Held and replayed in order once the
    /// pipeline before it has finished: its head, body and end, or a parse
    /// error. Replayed by a loop (`replayDeferred`), so a run of pipelined
    /// requests answered at once does not nest one call per request.
    private enum Deferred {
        case part(HTTPServerRequestPart)
        case error(any Error)
    }
    private var deferred = CircularBuffer<Deferred>()
    private var replaying = false

    static let highWater = 512 << 10
    static let lowWater = 128 << 10

    /// The connection's timeouts (nil in tests that build a bare pipeline):
    /// told when a request head is awaited and when it is complete.
    private let timeouts: ConnectionTimeoutHandler?

    init(worker: Worker, scheme: String, timeouts: ConnectionTimeoutHandler? = nil) {
        self.worker = worker
        self.scheme = scheme
        self.timeouts = timeouts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.flushHeadTask = { bound.value.flushHead() }
        self.clientAddress = context.channel.remoteAddress?.ipAddress
        timeouts?.awaitRequestHead()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.flushHeadTask = nil  // it holds this handler
    }

    var allocator: ByteBufferAllocator { context?.channel.allocator ?? ByteBufferAllocator() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if lingering { return }
        let part = unwrapInboundIn(data)
        if case .head = part, pipeline != nil || !context.channel.isWritable {
            // Another request while one runs, or while the client is not
            // taking the answers already written (pipelined requests from a
            // client that never reads): held, and, in the second case,
            // nothing more is read until the connection drains.
            if pipeline == nil { readsPaused = true }
            deferred.append(.part(part))
            return
        }
        if !deferred.isEmpty {
            deferred.append(.part(part))
            return
        }
        handle(part)
    }

    private func handle(_ part: HTTPServerRequestPart) {
        switch part {
        case .head(let head):
            timeouts?.requestHeadReceived()
            requestComplete = false
            startRequest(head)
        case .body(let buffer):
            // A body the intake framed as none: the parser and the gateway
            // disagree on this connection's framing, so it ends with the answer.
            if !requestHasBody { keepAlive = false }
            guard let pipeline else { return }
            unconsumed += buffer.readableBytes
            if unconsumed > Self.highWater { readsPaused = true }
            pipeline.receiveBody(buffer)
        case .end:
            requestComplete = true
            if upgradeRequested { readsPaused = true }
            if discardingRequest {
                discardingRequest = false
                return
            }
            pipeline?.receiveEnd()
        }
    }

    private func startRequest(_ head: HTTPRequestHead) {
        let snapshot = worker.snapshot
        keepAlive = head.isKeepAlive
        requestIsHTTP10 = head.version.major == 1 && head.version.minor == 0
        unconsumed = 0
        var headerBytes = 0
        // Counted as HTTP/2 counts a header list (RFC 7541 §4.1: name + value + 32
        // per field), so `limits.maxHeaderListBytes` means the same on both.
        for (n, v) in head.headers { headerBytes += n.utf8.count + v.utf8.count + 32 }
        let (request, body, refusal) = RequestIntake.accept(
            method: head.method.rawValue, target: head.uri, authority: nil, headers: head.headers, wire: .http1,
            scheme: scheme, clientAddress: clientAddress, worker: worker)
        // CONNECT (a tunnel, which the gateway does not make; HTTP/2 resets it)
        // and a Content-Length that is no number: NIO's parser stops reading
        // after a CONNECT head, and a length read two ways lets a request ride
        // inside a body. Answered 400 and the connection closed.
        // (The intake frames a Content-Length it cannot read as none.)
        // Two Host fields (RFC 9112 §3.2: answered 400): an upstream that picks
        // a site by Host could read the other one than the gateway logged.
        // A Transfer-Encoding other than `chunked` alone (RFC 9112 §6.3: 400
        // and close) and an HTTP/1.1 request without Host (§3.2) likewise.
        let refusedFraming: Rejection? =
            if head.method == .CONNECT {
                Rejection(.malformedRequest, "CONNECT is not proxied")
            } else if body.framing == .none, head.headers.contains(name: "transfer-encoding") {
                Rejection(.malformedRequest, "a transfer coding other than chunked alone")
            } else if body.framing == .none, head.headers.contains(name: "content-length") {
                Rejection(.malformedRequest, "Content-Length is not a number")
            } else if head.headers["host"].count > 1 {
                Rejection(.malformedRequest, "more than one Host field")
            } else if request.authority == nil, head.version.major == 1, head.version.minor >= 1 {
                Rejection(.malformedRequest, "an HTTP/1.1 request without Host")
            } else {
                nil
            }
        if let refusedFraming {
            keepAlive = false
            discardingRequest = true
            refuseHead(refusedFraming, requestId: request.requestId, method: head.method.rawValue, target: head.uri, observer: worker.observer)
            return
        }
        if headerBytes > snapshot.config.limits.maxHeaderListBytes {
            keepAlive = false
            discardingRequest = true
            refuseHead(
                Rejection(.headersTooLarge, "head over limits.maxHeaderListBytes"), requestId: request.requestId, method: head.method.rawValue, target: head.uri,
                observer: worker.observer)
            return
        }
        requestHasBody = !body.isEmpty
        if head.headers.contains(name: "upgrade"),
            head.headers[canonicalForm: "connection"].contains(where: { ASCII.equalsCI(String($0), "upgrade") })
        {
            // Answered as a plain request (the gateway upgrades to nothing);
            // the parser stops after it, so nothing more is read.
            upgradeRequested = true
            keepAlive = false
        }
        let expectsContinue =
            requestHasBody
            && request.headers[canonicalForm: "expect"].contains(where: { ASCII.equalsCI(String($0), "100-continue") })
        // Handed over, not copied (see HTTP2ServerConnection.startRequest).
        let p = RequestPipeline(request: consume request, body: body, sink: self, worker: worker, refusal: consume refusal)
        pipeline = p
        p.start()
        // The gateway streams the body itself: invite it instead of making the
        // client wait for an upstream that never sees the Expect header, but
        // only once the head has passed: a request answered from its head
        // (413 for its length, 401 without an assertion) gets no invitation
        // to send a body that would be read and dropped.
        if expectsContinue, !responding, pipeline === p, let context {
            let interim = HTTPResponseHead(version: .http1_1, status: .continue)
            context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
        }
    }

    // MARK: ResponseSink

    func sendResponseHead(status: Int, headers: HTTPHeaders, endStream: Bool) {
        guard let context else { return }
        responding = true
        var h = headers
        // Answered before the body was read (413, 404, early upstream answer): close rather
        // than read and discard what may be a very large body.
        if !requestComplete, requestHasBody { keepAlive = false }
        // An HTTP/1.0 client gets an HTTP/1.0 answer, which NIO's encoder never
        // frames as chunked: a body without a length ends with the connection.
        if requestIsHTTP10, !endStream, !h.contains(name: "content-length") { keepAlive = false }
        if !keepAlive { h.replaceOrAdd(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: requestIsHTTP10 ? .http1_0 : .http1_1, status: HTTPResponseStatus(statusCode: status), headers: h)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if endStream {
            sendResponseEnd()
        } else if !headUnflushed, let flushHeadTask {
            headUnflushed = true
            context.eventLoop.execute(flushHeadTask)
        }
    }

    private func flushHead() {
        guard headUnflushed else { return }
        headUnflushed = false
        context?.flush()
    }

    func sendUpstreamResponseHead(_ head: UpstreamResponseHead, requestId: String) {
        var h = Self.forwardedFields(of: head, room: 1)
        h.add(name: "x-request-id", value: requestId)
        sendResponseHead(status: head.status, headers: h, endStream: false)
    }

    /// The fields of an upstream's head that are forwarded, for NIO's encoder
    /// (with `room` for more).
    private static func forwardedFields(of head: UpstreamResponseHead, room: Int = 0) -> HTTPHeaders {
        var h = HTTPHeaders()
        h.reserveCapacity(head.fields.count + room)
        head.forEachForwarded { name, value in
            h.add(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        }
        return h
    }

    /// Sent at once (hints are worth something only before the answer);
    /// never to an HTTP/1.0 client, which cannot read one (RFC 9110 §15.2).
    func sendInterimHead(_ head: UpstreamResponseHead) {
        guard let context, !responding, !requestIsHTTP10 else { return }
        let interim = HTTPResponseHead(
            version: .http1_1, status: HTTPResponseStatus(statusCode: head.status), headers: Self.forwardedFields(of: head))
        context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
    }

    func sendResponseBody(_ buffer: ByteBuffer) {
        guard let context else { return }
        headUnflushed = false
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
    }

    /// Dropped: trailers need chunked framing and a client that asked for
    /// them (`TE: trailers`); HTTP/1.1 clients of a gRPC service are rare.
    func sendResponseTrailers(_ fields: HTTPHeaders) {}

    func sendResponseEnd() {
        guard let context, responding else { return }
        responding = false
        headUnflushed = false
        let close = !keepAlive
        if close, !requestComplete, requestHasBody {
            // Half-close: the client sees the answer and EOF, and its remaining
            // body is drained until it stops or the linger timeout closes for good.
            lingering = true
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                channel.close(mode: .output, promise: nil)
                channel.eventLoop.scheduleTask(in: Self.lingerTimeout) { channel.close(promise: nil) }
            }
        } else if close {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            timeouts?.awaitRequestHead()
        }
        resumeReads()
    }

    func abortResponse(http2ErrorCode: UInt32?) {
        context?.close(promise: nil)
    }

    func requestBodyConsumed(_ bytes: Int) {
        unconsumed -= bytes
        if readsPaused, unconsumed < Self.lowWater { resumeReads() }
    }

    var isCongested: Bool { !(context?.channel.isWritable ?? false) }

    func pipelineFinished() {
        pipeline = nil
        if !responding { resumeReads() }
        replayDeferred()
    }

    /// Hands held requests on while no pipeline is running; a request answered
    /// during its replay lets the loop go on rather than replaying from inside.
    private func replayDeferred() {
        guard !replaying, let context else { return }
        replaying = true
        defer { replaying = false }
        while let next = deferred.first {
            if lingering || !context.channel.isActive {
                deferred.removeAll()
                return
            }
            if case .part(.head) = next, pipeline != nil || !context.channel.isWritable { return }
            deferred.removeFirst()
            switch next {
            case .part(let part): handle(part)
            case .error(let error): handleError(context: context, error: error)
            }
        }
    }

    private func resumeReads() {
        if parserStopped { return }
        readsPaused = false
        if lingering, let context {
            // Keep draining the rest of the refused body.
            pendingRead = false
            context.read()
            return
        }
        if pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }

    // MARK: channel events

    func read(context: ChannelHandlerContext) {
        if readsPaused, !lingering {
            pendingRead = true
        } else {
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            writeStallTimer?.cancel()
            writeStallTimer = nil
            pipeline?.downstreamDrained()
            if pipeline == nil, !deferred.isEmpty { replayDeferred() }
            // Reads held for the drain (and not for a body backlog) go on.
            if readsPaused, unconsumed < Self.lowWater, !responding { resumeReads() }
        } else if writeStallTimer == nil {
            // The client stopped taking bytes: give it `streamWriteTimeout`, then
            // close (the pipeline releases its upstream connection).
            let channel = context.channel
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            writeStallTimer = context.eventLoop.scheduleTask(in: worker.snapshot.config.limits.streamWriteTimeout) {
                let me = bound.value
                me.writeStallTimer = nil
                guard !channel.isWritable, channel.isActive else { return }
                me.worker.observer?.timedOut(.streamWrite)
                channel.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    private var writeStallTimer: Scheduled<Void>?

    func channelInactive(context: ChannelHandlerContext) {
        writeStallTimer?.cancel()
        writeStallTimer = nil
        deferred.removeAll()
        let p = pipeline
        pipeline = nil
        p?.downstreamAborted()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if lingering, event is ChannelEvent, case .inputClosed = event as? ChannelEvent {
            // The client finished sending (or gave up): done draining.
            context.close(promise: nil)
            return
        }
        // ChannelShouldQuiesceEvent (shutdown, idle close) never comes here:
        // NIO's HTTPServerPipelineHandler takes it, closes an idle connection,
        // adds `Connection: close` to a head not yet written and closes after
        // the answer's end (ServeProcessTests pins it).
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if lingering { return }
        if !deferred.isEmpty {
            deferred.append(.error(error))
            return
        }
        handleError(context: context, error: error)
    }

    private func handleError(context: ChannelHandlerContext, error: Error) {
        if error is HTTPParserError, let pipeline, !requestComplete {
            // The body could not be read (an invalid chunk size or line): the
            // pipeline answers 400 (or resets an answer under way) and closes
            // the upstream connection if the head already went there.
            keepAlive = false
            requestComplete = true
            discardingRequest = true
            // It closes the connection once the answer is written.
            pipeline.receiveMalformedBody()
            return
        }
        guard let parseError = error as? HTTPParserError, !responding, pipeline == nil else {
            context.close(promise: nil)
            return
        }
        keepAlive = false
        let rejection =
            parseError == .headerOverflow
            ? Rejection(.headersTooLarge, "head over limits.maxHeaderListBytes") : Rejection(.malformedRequest, "not HTTP/1.1")
        refuseHead(rejection, requestId: worker.requestIds.make(), method: "", target: "", observer: worker.observer)
    }
}
