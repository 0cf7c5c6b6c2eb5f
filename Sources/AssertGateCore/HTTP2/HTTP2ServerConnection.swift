import CNGHTTP2
import Logging
import NIOCore
import NIOHTTP1
import Verifier

/// An HTTP/2 server connection with libnghttp2 as the codec.
///
/// nghttp2 callbacks only record events (`events`); they are acted on after
/// `nghttp2_session_mem_recv`/`mem_send` return, so no nghttp2 function is
/// ever called from inside a callback. Output is drained with `mem_send` into
/// one buffer per flush, batching frames of all streams into one write.
final class HTTP2ServerConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Event {
        case requestHead(Int32, endStream: Bool)
        case body(Int32, ByteBuffer)
        case requestEnd(Int32)
        case closed(Int32)
        case drained(Int32)
        case abuse
    }

    private var session: OpaquePointer?
    let worker: Worker
    let scheme: String
    private var context: ChannelHandlerContext?
    private(set) var allocator = ByteBufferAllocator()
    private var streams: [Int32: HTTP2Stream] = [:]
    /// The stream looked up last: a request's callbacks and events come one stream at a
    /// time, so most lookups skip hashing. Cleared whenever a stream leaves `streams`.
    private var lastStream: HTTP2Stream?

    @inline(__always)
    private func lookupStream(_ id: Int32) -> HTTP2Stream? {
        if let s = lastStream, s.id == id { return s }
        let s = streams[id]
        if s != nil { lastStream = s }
        return s
    }
    private var events: [Event] = []
    private var inRead = false
    /// True while nghttp2 runs (mem_recv/mem_send): debug builds assert that no
    /// nghttp2 function is entered from one of its own callbacks.
    private var insideNghttp2 = false
    private var flushScheduled = false
    private var selfBound: NIOLoopBound<HTTP2ServerConnection>?
    private var clientAddress: String?
    /// Requests whose pipeline has not finished (reset streams included).
    private(set) var activeRequests = 0
    private var goingAway = false
    private var closing = false
    /// Inbound bytes being fed to mem_recv, for zero-copy DATA slices.
    private var inboundBase: UnsafeRawPointer?
    private var inboundCount = 0
    private var inboundBuffer: ByteBuffer?
    /// The connection's timeouts (absent in tests that build a bare pipeline):
    /// told when a header block begins and ends, for `headerTimeout`.
    private var timeouts: ConnectionTimeoutHandler?
    /// The stream whose header block (HEADERS + CONTINUATIONs) is arriving:
    /// at most one, as a block's frames may not interleave with others.
    private var headerBlockStream: Int32?

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

    static let initialStreamWindow: UInt32 = 256 << 10
    static let connectionWindow: Int32 = 1 << 20
    static let maxOutputPerFlush = 1 << 20

    init(worker: Worker, scheme: String) {
        self.worker = worker
        self.scheme = scheme
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    // MARK: lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.allocator = context.channel.allocator
        self.selfBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.clientAddress = context.channel.remoteAddress?.ipAddress
        self.timeouts = try? context.pipeline.syncOperations.handler(type: ConnectionTimeoutHandler.self)
        do {
            try createSession()
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
        if let session { nghttp2_session_del(session) }
        session = nil
        self.context = nil
        self.selfBound = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopStallWatch()
        abortAll()
        context.fireChannelInactive()
    }

    private func abortAll() {
        let open = streams.values
        streams.removeAll()
        lastStream = nil
        for s in open {
            s.isClosed = true
            s.pipeline?.downstreamAborted()
        }
    }

    private struct SessionError: Error { var code: Int32 }

    private func createSession() throws {
        var cbs: OpaquePointer?
        guard nghttp2_session_callbacks_new(&cbs) == 0, let cbs else { throw SessionError(code: -1) }
        defer { nghttp2_session_callbacks_del(cbs) }
        Self.installCallbacks(cbs)

        var opt: OpaquePointer?
        guard nghttp2_option_new(&opt) == 0, let opt else { throw SessionError(code: -1) }
        defer { nghttp2_option_del(opt) }
        let l = limits
        nghttp2_option_set_no_auto_window_update(opt, 1)
        nghttp2_option_set_stream_reset_rate_limit(
            opt, UInt64(max(1, l.streamResetRate.burst)), UInt64(max(1, l.streamResetRate.perSecond.rounded(.up))))
        nghttp2_option_set_max_continuations(opt, 8)
        nghttp2_option_set_max_settings(opt, 32)
        nghttp2_option_set_max_outbound_ack(opt, 1000)

        var s: OpaquePointer?
        let rv = nghttp2_session_server_new2(&s, cbs, Unmanaged.passUnretained(self).toOpaque(), opt)
        guard rv == 0, let s else { throw SessionError(code: rv) }
        session = s

        var settings = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: UInt32(clamping: l.maxConcurrentStreams)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: Self.initialStreamWindow),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(clamping: l.maxHeaderListBytes)),
        ]
        let srv = nghttp2_submit_settings(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        guard srv == 0 else { throw SessionError(code: srv) }
        _ = nghttp2_session_set_local_window_size(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Self.connectionWindow)
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session, !closing else { return }
        let buffer = unwrapInboundIn(data)
        inRead = true
        let rv = buffer.withUnsafeReadableBytes { bytes -> Int in
            inboundBase = UnsafeRawPointer(bytes.baseAddress)
            inboundCount = bytes.count
            inboundBuffer = buffer
            defer {
                inboundBase = nil
                inboundBuffer = nil
            }
            insideNghttp2 = true
            defer { insideNghttp2 = false }
            return nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        if rv < 0 {
            // Bad preface, flood detected by nghttp2, …: nghttp2 queued a GOAWAY if it could.
            worker.logger.debug("h2 session error", metadata: ["code": "\(rv)"])
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
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
        guard let session, !goingAway else { return }
        goingAway = true
        let last = nghttp2_session_get_last_proc_stream_id(session)
        _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, NGHTTP2_NO_ERROR.rawValue, nil, 0)
        scheduleFlush()
    }

    private func enhanceYourCalm() {
        guard let session, !closing else { return }
        worker.logger.info("h2 abuse, GOAWAY(ENHANCE_YOUR_CALM)", metadata: ["peer": "\(clientAddress ?? "?")"])
        _ = nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        closeAfterFlush()
    }

    private func closeAfterFlush() {
        closing = true
        scheduleFlush()
    }

    // MARK: events (outside any nghttp2 callback)

    private func processEvents() {
        var i = 0
        // Handling an event may append more (e.g. a synchronous answer); loop by index.
        while i < events.count {
            let e = events[i]
            i += 1
            handle(e)
        }
        events.removeAll(keepingCapacity: true)
    }

    private func handle(_ event: Event) {
        switch event {
        case .requestHead(let id, let endStream):
            guard let stream = lookupStream(id), !stream.isClosed else { return }
            startRequest(stream, endStream: endStream)
        case .body(let id, let buffer):
            if let p = lookupStream(id)?.pipeline {
                p.receiveBody(buffer)
            } else {
                consume(streamId: id, bytes: buffer.readableBytes)
            }
        case .requestEnd(let id):
            lookupStream(id)?.pipeline?.receiveEnd()
        case .closed(let id):
            if lastStream?.id == id { lastStream = nil }
            guard let stream = streams.removeValue(forKey: id) else { return }
            stream.isClosed = true
            if let p = stream.pipeline { p.downstreamAborted() }
        case .drained(let id):
            lookupStream(id)?.pipeline?.downstreamDrained()
        case .abuse:
            enhanceYourCalm()
        }
    }

    private func startRequest(_ stream: HTTP2Stream, endStream: Bool) {
        if closing { return }
        if activeRequests >= limits.maxConcurrentStreams {
            // Reset streams whose upstream work is still running count too.
            resetStream(stream, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
            return
        }
        guard let method = stream.method, let path = stream.path else {
            resetStream(stream, errorCode: NGHTTP2_PROTOCOL_ERROR.rawValue)
            return
        }
        if method == "CONNECT" {
            resetStream(stream, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
            return
        }
        let snapshot = worker.snapshot
        var headers = stream.headers
        stream.headers = HTTPHeaders()
        if !stream.cookies.isEmpty {
            headers.add(name: "cookie", value: stream.cookies.joined(separator: "; "))
        }
        let accepted = HeaderRewriter.sanitizeClientHeaders(&headers, snapshot: snapshot)
        let framing: RequestBodyFraming
        if endStream {
            framing = (method == "POST" || method == "PUT" || method == "PATCH") ? .empty : .none
        } else if let cl = headers.first(name: "content-length"), let n = Int(cl), n >= 0 {
            framing = .contentLength(n)
        } else {
            framing = .chunked
        }
        let request = ProxyRequest(
            method: method, target: path, authority: stream.authority ?? headers.first(name: "host"),
            scheme: scheme, headers: headers,
            requestId: worker.requestId(clientValue: headers.first(name: "x-request-id")),
            clientAddress: clientAddress, snapshot: snapshot)
        let pipeline = RequestPipeline(
            request: request, body: RequestBodyInfo(framing: framing), sink: stream, worker: worker,
            refusal: accepted ? nil : .malformedRequest)
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
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
        guard let session else { return }
        let rv = withNVScratch { bytes, spans, nva -> Int32 in
            Self.appendNV(":status", String(status), flags: 0, bytes: &bytes, spans: &spans)
            // A fresh id per response would only churn the HPACK dynamic table (and push out
            // server/content-type/date): send it never-indexed.
            let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
            for (name, value) in headers {
                let isRequestId = ASCII.equalsCI(name, "x-request-id")
                Self.appendNV(name, value, flags: isRequestId ? noIndex : 0, bytes: &bytes, spans: &spans)
            }
            return bytes.withUnsafeMutableBufferPointer { buf -> Int32 in
                guard let base = buf.baseAddress else { return -1 }
                for s in spans { nva.append(s.nv(base)) }
                return submit(session, stream, nva, endStream: endStream)
            }
        }
        submitted(stream, rv)
    }

    /// An upstream's head: the header list points straight into the parsed head
    /// bytes (names already lower-cased, hop-by-hop fields marked), so no field
    /// is copied before nghttp2 copies it into its own frame.
    func submitUpstreamResponse(_ stream: HTTP2Stream, head: UpstreamResponseHead, requestId: String) {
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
        guard let session else { return }
        let rv = withNVScratch { scratch, spans, nva -> Int32 in
            Self.appendNV(":status", String(head.status), flags: 0, bytes: &scratch, spans: &spans)
            // A fresh id per response would only churn the HPACK dynamic table: never-indexed.
            Self.appendNV(
                "x-request-id", requestId, flags: UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue), bytes: &scratch,
                spans: &spans)
            return scratch.withUnsafeMutableBufferPointer { local -> Int32 in
                head.bytes.withUnsafeBufferPointer { upstream -> Int32 in
                    guard let lb = local.baseAddress, let ub = upstream.baseAddress else { return -1 }
                    let upstreamBase = UnsafeMutablePointer(mutating: ub)
                    // :status first (pseudo-headers precede fields), then the upstream's, then the id.
                    nva.append(spans[0].nv(lb))
                    for f in head.fields where f.forward {
                        nva.append(
                            nghttp2_nv(
                                name: upstreamBase + f.nameStart, value: upstreamBase + f.valueStart,
                                namelen: f.nameLength, valuelen: f.valueLength, flags: 0))
                    }
                    nva.append(spans[1].nv(lb))
                    return submit(session, stream, nva, endStream: false)
                }
            }
        }
        submitted(stream, rv)
    }

    /// Lends the scratch arrays, emptied. They are moved out of the properties
    /// (no copy, no per-byte exclusivity checks on class storage) and handed
    /// back after, so their capacity serves the next response. The header
    /// list's pointers are only valid inside `body`.
    private func withNVScratch(_ body: (inout [UInt8], inout [NVSpan], inout [nghttp2_nv]) -> Int32) -> Int32 {
        var bytes: [UInt8] = []
        var spans: [NVSpan] = []
        var nva: [nghttp2_nv] = []
        swap(&bytes, &nvBytes)
        swap(&spans, &nvSpans)
        swap(&nva, &nvArray)
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
        nva.removeAll(keepingCapacity: true)
        defer {
            nva.removeAll(keepingCapacity: true)
            swap(&bytes, &nvBytes)
            swap(&spans, &nvSpans)
            swap(&nva, &nvArray)
        }
        return body(&bytes, &spans, &nva)
    }

    /// nghttp2 copies the list (and the provider) before it returns.
    private func submit(_ session: OpaquePointer, _ stream: HTTP2Stream, _ nva: [nghttp2_nv], endStream: Bool) -> Int32 {
        if endStream { return nghttp2_submit_response(session, stream.id, nva, nva.count, nil) }
        var provider = nghttp2_data_provider(
            source: nghttp2_data_source(ptr: Unmanaged.passUnretained(stream).toOpaque()),
            read_callback: HTTP2ServerConnection.readCallback)
        return nghttp2_submit_response(session, stream.id, nva, nva.count, &provider)
    }

    private func submitted(_ stream: HTTP2Stream, _ rv: Int32) {
        if rv != 0 {
            worker.logger.debug("submit_response failed", metadata: ["code": "\(rv)"])
            resetStream(stream, errorCode: NGHTTP2_INTERNAL_ERROR.rawValue)
        }
        scheduleFlush()
    }

    private struct NVSpan {
        var nameStart: Int
        var nameLen: Int
        var valueStart: Int
        var valueLen: Int
        var flags: UInt8

        func nv(_ base: UnsafeMutablePointer<UInt8>) -> nghttp2_nv {
            nghttp2_nv(name: base + nameStart, value: base + valueStart, namelen: nameLen, valuelen: valueLen, flags: flags)
        }
    }
    private var nvBytes: [UInt8] = []
    private var nvSpans: [NVSpan] = []
    private var nvArray: [nghttp2_nv] = []

    private static func appendNV(
        _ name: String, _ value: String, flags: UInt8, bytes: inout [UInt8], spans: inout [NVSpan]
    ) {
        let ns = bytes.count
        // One bulk copy, then lower-case in place (not a checked append per byte).
        bytes.append(contentsOf: name.utf8)
        let vs = bytes.count
        bytes.withUnsafeMutableBufferPointer { b in
            for i in ns..<vs { b[i] = ASCII.lower(b[i]) }
        }
        bytes.append(contentsOf: value.utf8)
        spans.append(NVSpan(nameStart: ns, nameLen: vs - ns, valueStart: vs, valueLen: bytes.count - vs, flags: flags))
    }

    // MARK: stalled writes (limits.streamWriteTimeout)

    private var stallWatch: RepeatedTask?
    /// When the socket last stopped accepting writes, while it still does not.
    private var unwritableSince: NIODeadline?

    /// A stream has response bytes queued: watch for a client that never takes them.
    func watchForStalledWrites() {
        guard stallWatch == nil, let context, let selfBound else { return }
        let timeout = limits.streamWriteTimeout
        let tick = max(TimeAmount.milliseconds(50), min(.seconds(1), .nanoseconds(timeout.nanoseconds / 4)))
        stallWatch = context.eventLoop.scheduleRepeatedTask(initialDelay: tick, delay: tick) { _ in
            selfBound.value.checkStalledWrites(timeout: timeout)
        }
    }

    private func checkStalledWrites(timeout: TimeAmount) {
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
        for stream in streams.values where stream.outBytes > 0 && !stream.isClosed {
            if stream.lastOutputProgress + timeout <= now { stalled.append(stream) } else { waiting = true }
        }
        for stream in stalled {
            // Its flow-control window stayed shut: reset it, and end its request now
            // (the close event comes only once the RST_STREAM is written).
            worker.observer?.timedOut(.streamWrite)
            stream.outQueue.removeAll()
            stream.outBytes = 0
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
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
        guard let session, stream.deferred, !stream.isClosed else { return }
        stream.deferred = false
        _ = nghttp2_session_resume_data(session, stream.id)
        scheduleFlush()
    }

    func resetStream(_ stream: HTTP2Stream, errorCode: UInt32) {
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
        guard let session, !stream.isClosed else { return }
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, errorCode)
        if !serverResetBudget.take() { events.append(.abuse) }
        scheduleFlush()
    }

    func consume(streamId: Int32, bytes: Int) {
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
        guard let session, bytes > 0 else { return }
        // Updates the connection window even when the stream is already gone.
        _ = nghttp2_session_consume(session, streamId, bytes)
        scheduleFlush()
    }

    // MARK: output

    private func scheduleFlush() {
        if inRead || flushScheduled { return }
        guard let context, let selfBound else { return }
        flushScheduled = true
        context.eventLoop.execute { selfBound.value.flushNow() }
    }

    /// Drains nghttp2 into one buffer and writes it with one flush.
    func flushNow() {
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
        flushScheduled = false
        // After channelInactive the stream objects the data providers point to may be
        // gone: never run nghttp2 output on a dead connection.
        guard let context, let session, context.channel.isActive else { return }
        var out: ByteBuffer?
        var rounds = 0
        var more = false
        repeat {
            rounds += 1
            processEvents()
            more = drain(session, into: &out)
        } while !events.isEmpty && rounds < 8
        processEvents()
        let wantsWrite = nghttp2_session_want_write(session) != 0
        let finished =
            closing
            || (!wantsWrite
                && (nghttp2_session_want_read(session) == 0
                    || (goingAway && streams.isEmpty && activeRequests == 0)))
        if finished {
            reportFailedHeaderBlock()
            closing = true
            let channel = context.channel
            if let out, out.readableBytes > 0 {
                context.writeAndFlush(wrapOutboundOut(out)).whenComplete { _ in channel.close(promise: nil) }
            } else {
                context.close(promise: nil)
            }
            return
        }
        if var out, out.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(out), promise: nil)
            // Kept: once the socket has taken it, this is its only reference and the
            // next flush writes into it without allocating (else it copies, as before).
            out.clear()
            spareOutput = out
        }
        if more, context.channel.isWritable { scheduleFlush() }
    }

    /// The last flush's output buffer, for the next one (see `flushNow`).
    private var spareOutput: ByteBuffer?

    /// True when output is left because the per-flush cap was reached.
    private func drain(_ session: OpaquePointer, into out: inout ByteBuffer?) -> Bool {
        // A client that stopped reading (but granted a large window) must not make us move
        // every queued byte into the socket's buffer: wait for writability, so the stream
        // queues fill and the upstreams are paused instead.
        guard let context, context.channel.isWritable else { return true }
        while true {
            var ptr: UnsafePointer<UInt8>?
            insideNghttp2 = true
            let n = nghttp2_session_mem_send(session, &ptr)
            insideNghttp2 = false
            if n < 0 {
                closing = true
                return false
            }
            guard n > 0, let ptr else { return false }
            if out == nil {
                if var spare = spareOutput.take() {
                    spare.clear()
                    out = spare
                } else {
                    out = allocator.buffer(capacity: max(4096, n))
                }
            }
            out?.writeBytes(UnsafeRawBufferPointer(start: ptr, count: n))
            if let o = out, o.readableBytes >= Self.maxOutputPerFlush { return true }
        }
    }

    // MARK: nghttp2 callbacks (record only)


    fileprivate func cbBeginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        let id = frame.pointee.hd.stream_id
        // Request heads and trailers alike: the block must complete in time.
        headerBlockStream = id
        timeouts?.requestHeadStarted()
        guard frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
        let stream = HTTP2Stream(id: id, connection: self)
        streams[id] = stream
        lastStream = stream
        return 0
    }

    fileprivate func cbHeader(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>
    ) -> Int32 {
        guard let stream = lookupStream(frame.pointee.hd.stream_id) else { return 0 }
        stream.headerListBytes += name.count + value.count + 32
        if stream.headerListBytes > limits.maxHeaderListBytes {
            // Request heads only: oversized trailers reset a stream whose pipeline reports it.
            if !stream.headersTooLarge, !stream.headersDone {
                // Refused before any pipeline exists: counted and logged like one (status 0:
                // HTTP/2 has no answer for it, nghttp2 resets the stream).
                worker.observer?.requestFinished(
                    .refusedHead(
                        requestId: worker.requestIds.make(), method: stream.method ?? "", target: stream.path ?? "",
                        status: 0, reason: .headersTooLarge))
            }
            stream.headersTooLarge = true
            // nghttp2 resets the stream; count it as a server reset.
            if !serverResetBudget.take() { events.append(.abuse) }
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        if stream.headersDone { return 0 }  // trailers: counted, not forwarded
        if name.first == UInt8(ascii: ":") {
            let v = String(decoding: value, as: UTF8.self)
            switch String(decoding: name, as: UTF8.self) {
            case ":method": stream.method = v
            case ":path": stream.path = v
            case ":authority": stream.authority = v
            default: break  // :scheme is the transport's, :protocol unsupported
            }
            return 0
        }
        let n = String(decoding: name, as: UTF8.self)
        let v = String(decoding: value, as: UTF8.self)
        if n == "cookie" {
            stream.cookies.append(v)
        } else {
            stream.headers.add(name: n, value: v)
        }
        return 0
    }

    fileprivate func cbFrameRecv(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let hd = frame.pointee.hd
        let endStream = hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(hd.type) {
        case NGHTTP2_HEADERS.rawValue:
            if hd.stream_id == headerBlockStream { headerBlockEnded() }
            guard let stream = lookupStream(hd.stream_id) else { return 0 }
            if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                stream.headersDone = true
                if !stream.headersTooLarge { events.append(.requestHead(hd.stream_id, endStream: endStream)) }
            } else if endStream {
                events.append(.requestEnd(hd.stream_id))
            }
        case NGHTTP2_DATA.rawValue:
            if endStream {
                events.append(.requestEnd(hd.stream_id))
            } else if hd.length == 0, !emptyDataBudget.take() {
                events.append(.abuse)
            }
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0, !settingsBudget.take() { events.append(.abuse) }
        case NGHTTP2_RST_STREAM.rawValue:
            if !clientResetBudget.take() { events.append(.abuse) }
        case NGHTTP2_PING.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0, !pingBudget.take() { events.append(.abuse) }
        default:
            break
        }
        return 0
    }

    fileprivate func cbDataChunk(_ streamId: Int32, _ data: UnsafePointer<UInt8>, _ len: Int) -> Int32 {
        let p = UnsafeRawPointer(data)
        var chunk: ByteBuffer
        if let base = inboundBase, let inbound = inboundBuffer, p >= base, p + len <= base + inboundCount,
            let slice = inbound.getSlice(at: inbound.readerIndex + (p - base), length: len)
        {
            chunk = slice  // zero copy: a view of the inbound read buffer
        } else {
            chunk = allocator.buffer(capacity: len)
            chunk.writeBytes(UnsafeRawBufferPointer(start: p, count: len))
        }
        events.append(.body(streamId, chunk))
        return 0
    }

    fileprivate func cbStreamClose(_ streamId: Int32, errorCode: UInt32) -> Int32 {
        // A block nghttp2 refused (bad field, too large) ends with its stream.
        if streamId == headerBlockStream { headerBlockEnded() }
        events.append(.closed(streamId))
        return 0
    }

    /// The session is ending with a request's header block unfinished: nghttp2
    /// refused the block for the whole connection. Its HPACK decoder takes no
    /// field over 64 KiB (a compile-time limit) and fails the connection with
    /// COMPRESSION_ERROR, so such a field cannot be answered per stream; it is
    /// still counted and logged, as `headers-too-large` when the block was
    /// that large on the wire, else as `malformed-request` (corrupt HPACK).
    private func reportFailedHeaderBlock() {
        guard let id = headerBlockStream, let stream = lookupStream(id), !stream.headersDone, !stream.headersTooLarge
        else { return }
        stream.headersTooLarge = true
        let reason: ReasonToken = headerBlockWireBytes >= Self.oversizedBlockBytes ? .headersTooLarge : .malformedRequest
        worker.observer?.requestFinished(
            .refusedHead(
                requestId: worker.requestIds.make(), method: stream.method ?? "", target: stream.path ?? "",
                status: 0, reason: reason))
    }

    /// HEADERS + CONTINUATION payload of the block in progress, as sent.
    private var headerBlockWireBytes = 0
    /// nghttp2 refuses an oversized field as soon as it reads the field's length,
    /// often within the first HEADERS frame (16 KiB): a block refused after this
    /// many bytes is counted as too large; a short one as corrupt HPACK.
    static let oversizedBlockBytes = 4 << 10

    fileprivate func cbBeginFrame(_ hd: UnsafePointer<nghttp2_frame_hd>) -> Int32 {
        switch UInt32(hd.pointee.type) {
        case NGHTTP2_HEADERS.rawValue: headerBlockWireBytes = hd.pointee.length
        case NGHTTP2_CONTINUATION.rawValue: headerBlockWireBytes += hd.pointee.length
        default: break
        }
        return 0
    }

    private func headerBlockEnded() {
        headerBlockStream = nil
        timeouts?.requestHeadReceived()
    }

    fileprivate func cbRead(_ stream: HTTP2Stream, _ buf: UnsafeMutablePointer<UInt8>, _ length: Int,
                            _ flags: UnsafeMutablePointer<UInt32>) -> Int {
        let n = stream.fill(buf, length: length)
        if stream.outQueue.isEmpty {
            if stream.outEnded {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            } else if n == 0 {
                stream.deferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        if stream.congested, stream.outBytes < HTTP2Stream.lowWater {
            stream.congested = false
            events.append(.drained(stream.id))
        }
        return n
    }

    static let readCallback: nghttp2_data_source_read_callback = { _, _, buf, length, flags, source, userData in
        guard let conn = h2Connection(userData), let buf, let flags, let ptr = source?.pointee.ptr else {
            return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
        }
        let stream = Unmanaged<HTTP2Stream>.fromOpaque(ptr).takeUnretainedValue()
        return conn.cbRead(stream, buf, length, flags)
    }

    private static func installCallbacks(_ cbs: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs) { _, frame, userData in
            guard let conn = h2Connection(userData), let frame else { return 0 }
            return conn.cbBeginHeaders(frame)
        }
        nghttp2_session_callbacks_set_on_header_callback(cbs) { _, frame, name, namelen, value, valuelen, _, userData in
            guard let conn = h2Connection(userData), let frame, let name, let value else { return 0 }
            return conn.cbHeader(
                frame, UnsafeBufferPointer(start: name, count: namelen), UnsafeBufferPointer(start: value, count: valuelen))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs) { _, frame, userData in
            guard let conn = h2Connection(userData), let frame else { return 0 }
            return conn.cbFrameRecv(frame)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs) { _, _, streamId, data, len, userData in
            guard let conn = h2Connection(userData), let data else { return 0 }
            return conn.cbDataChunk(streamId, data, len)
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs) { _, streamId, errorCode, userData in
            guard let conn = h2Connection(userData) else { return 0 }
            return conn.cbStreamClose(streamId, errorCode: errorCode)
        }
        nghttp2_session_callbacks_set_on_begin_frame_callback(cbs) { _, hd, userData in
            guard let conn = h2Connection(userData), let hd else { return 0 }
            return conn.cbBeginFrame(hd)
        }
    }
}

/// The session's `user_data`: an unretained pointer to the connection, whose lifetime covers the session's.
private func h2Connection(_ userData: UnsafeMutableRawPointer?) -> HTTP2ServerConnection? {
    guard let userData else { return nil }
    return Unmanaged<HTTP2ServerConnection>.fromOpaque(userData).takeUnretainedValue()
}
