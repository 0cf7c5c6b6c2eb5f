import CNGHTTP2
import NIOCore

/// Tunables of one client connection.
public struct HTTP2ClientConfiguration: Sendable {
    /// SETTINGS_INITIAL_WINDOW_SIZE we announce, and the connection window.
    public var initialWindowSize: Int32 = 16 << 20
    /// Our own cap on concurrent streams (the server's SETTINGS also apply).
    public var maxConcurrentStreams: Int = 1024
    /// Time allowed for the server's first SETTINGS frame.
    public var handshakeTimeout: TimeAmount = .seconds(10)
    /// Bodies larger than this fail the request instead of growing without end.
    public var maxResponseBodyBytes: Int = 64 << 20
    /// Limit on the response header block (names + values, all HEADERS frames).
    public var maxResponseHeaderBytes: Int = 256 << 10

    public init() {}
}

/// Speaks HTTP/2 (client, prior knowledge) on one channel through nghttp2.
///
/// Loop-confined. Inbound bytes go straight from the `ByteBuffer` into
/// `nghttp2_session_mem_recv`; output of `mem_send` is gathered into one buffer
/// and written once per processing pass. Promises are completed only after
/// nghttp2 has returned, so user callbacks never re-enter the session.
final class HTTP2ClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private final class Stream {
        let promise: EventLoopPromise<HTTPClientResponse>
        let body: [UInt8]
        var bodyOffset = 0
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var responseBody: [UInt8] = []
        var responseTooLarge: String?
        var headerBytes = 0

        init(promise: EventLoopPromise<HTTPClientResponse>, body: [UInt8]) {
            self.promise = promise
            self.body = body
        }
    }

    private typealias Completion = (EventLoopPromise<HTTPClientResponse>, Result<HTTPClientResponse, HTTP2ClientError>)

    let configuration: HTTP2ClientConfiguration
    let readyPromise: EventLoopPromise<Void>

    private var session: NGHTTP2ClientSession?
    private var context: ChannelHandlerContext?
    private var streams: [Int32: Stream] = [:]
    private var queue = CircularBuffer<(HTTPClientRequest, EventLoopPromise<HTTPClientResponse>)>()
    private var completions: [Completion] = []
    private var inSessionCall = false
    private var processing = false
    private var pendingPass = false
    private var passScheduled = false
    private var readyState: ReadyState = .waiting
    private var handshakeTimer: Scheduled<Void>?
    private(set) var goaway: (lastStreamId: Int32, errorCode: UInt32)?
    private(set) var isClosed = false
    /// Highest number of streams this client had open at once (for tests and stats).
    private(set) var peakConcurrentStreams = 0

    private enum ReadyState { case waiting, settingsReceived, done }

    init(configuration: HTTP2ClientConfiguration, readyPromise: EventLoopPromise<Void>) {
        self.configuration = configuration
        self.readyPromise = readyPromise
    }

    /// True while new requests can be started on this connection.
    var acceptsRequests: Bool { !isClosed && goaway == nil && session != nil }

    var openStreamCount: Int { streams.count }

    /// The concurrency the server currently allows, capped by our own limit.
    var streamLimit: Int {
        guard let session else { return 0 }
        return min(session.remoteMaxConcurrentStreams, configuration.maxConcurrentStreams)
    }

    // MARK: Requests

    func enqueue(_ request: HTTPClientRequest, promise: EventLoopPromise<HTTPClientResponse>) {
        if let goaway {
            promise.fail(HTTP2ClientError.goaway(lastStreamId: goaway.lastStreamId, errorCode: goaway.errorCode))
            return
        }
        guard !isClosed else {
            promise.fail(HTTP2ClientError.closedBeforeSend)
            return
        }
        queue.append((request, promise))
        schedulePass()
    }

    /// Sends GOAWAY and closes once written.
    func terminate() {
        guard let session, !isClosed else { return }
        inSessionCall = true
        _ = nghttp2_session_terminate_session(session.raw, UInt32(NGHTTP2_NO_ERROR.rawValue))
        inSessionCall = false
        process()
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard session == nil, !isClosed else { return }
        do {
            let session = try NGHTTP2ClientSession(handler: self)
            self.session = session
            var settings = [
                nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
                nghttp2_settings_entry(
                    settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                    value: UInt32(configuration.initialWindowSize)),
            ]
            let rv = settings.withUnsafeMutableBufferPointer {
                nghttp2_submit_settings(session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress, $0.count)
            }
            guard rv == 0 else {
                throw HTTP2ClientError.session(code: rv, message: NGHTTP2ClientSession.errorString(rv))
            }
            _ = nghttp2_session_set_local_window_size(
                session.raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, configuration.initialWindowSize)
        } catch {
            readyPromise.fail(error)
            readyState = .done
            context.close(promise: nil)
            return
        }
        let timeout = configuration.handshakeTimeout
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        handshakeTimer = context.eventLoop.scheduleTask(in: timeout) {
            let handler = bound.value
            guard handler.readyState == .waiting else { return }
            handler.readyState = .done
            handler.readyPromise.fail(HTTP2ClientError.handshakeTimeout)
            handler.context?.close(promise: nil)
        }
        process()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let session, !isClosed else { return }
        inSessionCall = true
        let rv = buffer.withUnsafeReadableBytes { bytes -> Int in
            guard let base = bytes.baseAddress else { return 0 }
            return nghttp2_session_mem_recv(session.raw, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        inSessionCall = false
        if rv < 0 {
            let code = Int32(truncatingIfNeeded: rv)
            fatal(.session(code: code, message: NGHTTP2ClientSession.errorString(code)))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        process()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        shutDown(inFlight: .connectionLost)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    // MARK: Processing

    private func schedulePass() {
        if processing || inSessionCall {
            pendingPass = true
            return
        }
        guard !passScheduled, let context else { return }
        // Coalesce requests enqueued in the same loop tick into one write.
        passScheduled = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            bound.value.passScheduled = false
            bound.value.process()
        }
    }

    private func process() {
        if processing {
            pendingPass = true
            return
        }
        processing = true
        repeat {
            pendingPass = false
            failQueuedIfGoingAway()
            submitQueued()
            flushSession()
            deliverCompletions()
        } while pendingPass && !isClosed
        processing = false
        if let session, !isClosed, !session.wantsIO, streams.isEmpty {
            // GOAWAY exchanged and nothing left in flight: the session is done.
            context?.close(promise: nil)
        }
    }

    private func failQueuedIfGoingAway() {
        guard let goaway else { return }
        while let (_, promise) = queue.popFirst() {
            completions.append((promise, .failure(.goaway(lastStreamId: goaway.lastStreamId, errorCode: goaway.errorCode))))
        }
    }

    private func submitQueued() {
        guard let session, !isClosed, readyState != .waiting else { return }
        while streams.count < streamLimit, let (request, promise) = queue.popFirst() {
            submit(request, promise: promise, session: session)
        }
    }

    private func submit(_ request: HTTPClientRequest, promise: EventLoopPromise<HTTPClientResponse>, session: NGHTTP2ClientSession) {
        var fields: [(String, String)] = [
            (":method", request.method), (":scheme", request.scheme),
            (":authority", request.authority), (":path", request.path),
        ]
        var hasContentLength = false
        for (name, value) in request.headers {
            let lower = name.lowercased()
            // Connection-specific fields are illegal in HTTP/2 (RFC 9113 §8.2.2).
            if ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"].contains(lower) {
                continue
            }
            if lower == "content-length" { hasContentLength = true }
            fields.append((lower, value))
        }
        if !request.body.isEmpty && !hasContentLength { fields.append(("content-length", String(request.body.count))) }

        let total = fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { storage.deallocate() }
        var nva: [nghttp2_nv] = []
        nva.reserveCapacity(fields.count)
        var offset = 0
        for (name, value) in fields {
            let n = copy(name, into: storage, at: &offset)
            let v = copy(value, into: storage, at: &offset)
            nva.append(nghttp2_nv(name: n.base, value: v.base, namelen: n.count, valuelen: v.count,
                                  flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
        }

        let hasBody = !request.body.isEmpty
        var provider = nghttp2_data_provider()
        provider.read_callback = nghttp2ReadBody
        inSessionCall = true
        let streamId = nva.withUnsafeBufferPointer { nv -> Int32 in
            if hasBody {
                return withUnsafePointer(to: &provider) {
                    nghttp2_submit_request(session.raw, nil, nv.baseAddress, nv.count, $0, nil)
                }
            }
            return nghttp2_submit_request(session.raw, nil, nv.baseAddress, nv.count, nil, nil)
        }
        inSessionCall = false
        guard streamId > 0 else {
            let error: HTTP2ClientError =
                streamId == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue
                ? .streamIdsExhausted
                : .session(code: streamId, message: NGHTTP2ClientSession.errorString(streamId))
            completions.append((promise, .failure(error)))
            return
        }
        streams[streamId] = Stream(promise: promise, body: request.body)
        peakConcurrentStreams = max(peakConcurrentStreams, streams.count)
    }

    private func copy(_ string: String, into storage: UnsafeMutableRawBufferPointer, at offset: inout Int)
        -> (base: UnsafeMutablePointer<UInt8>?, count: Int)
    {
        let utf8 = string.utf8
        let slice = UnsafeMutableRawBufferPointer(rebasing: storage[offset..<(offset + utf8.count)])
        slice.copyBytes(from: utf8)
        offset += utf8.count
        return (slice.baseAddress?.assumingMemoryBound(to: UInt8.self), utf8.count)
    }

    /// Drains everything nghttp2 wants to send into one buffer and writes it once.
    private func flushSession() {
        guard let session, let context, !isClosed else { return }
        var out: ByteBuffer?
        inSessionCall = true
        while true {
            var chunk: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session.raw, &chunk)
            if n < 0 {
                inSessionCall = false
                let code = Int32(truncatingIfNeeded: n)
                fatal(.session(code: code, message: NGHTTP2ClientSession.errorString(code)))
                return
            }
            guard n > 0, let chunk else { break }
            // The chunk is valid only until the next mem_send call: copy it now.
            if out == nil { out = context.channel.allocator.buffer(capacity: max(n, 1024)) }
            out?.writeBytes(UnsafeRawBufferPointer(start: chunk, count: n))
        }
        inSessionCall = false
        if let out { context.writeAndFlush(wrapOutboundOut(out), promise: nil) }
    }

    private func deliverCompletions() {
        if readyState == .settingsReceived {
            readyState = .done
            handshakeTimer?.cancel()
            readyPromise.succeed(())
        }
        guard !completions.isEmpty else { return }
        let batch = completions
        completions.removeAll(keepingCapacity: true)
        for (promise, result) in batch {
            switch result {
            case .success(let response): promise.succeed(response)
            case .failure(let error): promise.fail(error)
            }
        }
    }

    private func fatal(_ error: HTTP2ClientError) {
        shutDown(inFlight: error)
        context?.close(promise: nil)
    }

    private func shutDown(inFlight error: HTTP2ClientError) {
        guard !isClosed else { return }
        isClosed = true
        handshakeTimer?.cancel()
        for (_, stream) in streams { completions.append((stream.promise, .failure(error))) }
        streams.removeAll()
        while let (_, promise) = queue.popFirst() { completions.append((promise, .failure(.closedBeforeSend))) }
        if readyState != .done {
            readyState = .done
            readyPromise.fail(error)
        }
        if !inSessionCall {
            session = nil
            deliverCompletions()
        }
    }

    // MARK: Session callbacks (called by nghttp2 from inside mem_recv / mem_send)

    func sessionDidBeginHeaders(streamId: Int32) {
        guard let stream = streams[streamId] else { return }
        if let status = stream.status, (100..<200).contains(status) {
            // A final response follows an interim one: start over.
            stream.status = nil
            stream.headers.removeAll()
        }
    }

    func sessionDidReceiveHeader(streamId: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        guard let stream = streams[streamId], stream.responseTooLarge == nil else { return }
        stream.headerBytes += name.count + value.count
        if stream.headerBytes > configuration.maxResponseHeaderBytes {
            stream.responseTooLarge = "headers over \(configuration.maxResponseHeaderBytes) bytes"
            stream.headers = []
            return
        }
        let n = String(decoding: name, as: UTF8.self)
        let v = String(decoding: value, as: UTF8.self)
        if n == ":status" {
            stream.status = Int(v)
        } else if !n.hasPrefix(":") {
            stream.headers.append((n, v))
        }
    }

    func sessionDidReceiveData(streamId: Int32, data: UnsafeRawBufferPointer) {
        guard let stream = streams[streamId], stream.responseTooLarge == nil else { return }
        if stream.responseBody.count + data.count > configuration.maxResponseBodyBytes {
            stream.responseTooLarge = "body over \(configuration.maxResponseBodyBytes) bytes"
            stream.responseBody = []
            return
        }
        stream.responseBody.append(contentsOf: data)
    }

    func sessionDidCloseStream(streamId: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: streamId) else { return }
        let result: Result<HTTPClientResponse, HTTP2ClientError>
        if let tooLarge = stream.responseTooLarge {
            result = .failure(.responseTooLarge(tooLarge))
        } else if errorCode == NGHTTP2_NO_ERROR.rawValue, let status = stream.status, status >= 200 {
            result = .success(HTTPClientResponse(status: status, headers: stream.headers, body: stream.responseBody))
        } else if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            if let goaway, streamId > goaway.lastStreamId {
                result = .failure(.goaway(lastStreamId: goaway.lastStreamId, errorCode: goaway.errorCode))
            } else {
                result = .failure(.refusedStream)
            }
        } else {
            result = .failure(.streamReset(errorCode: errorCode))
        }
        completions.append((stream.promise, result))
    }

    func sessionDidReceiveSettings() {
        if readyState == .waiting { readyState = .settingsReceived }
        // A larger MAX_CONCURRENT_STREAMS may let queued requests go.
        pendingPass = true
    }

    func sessionDidReceiveGoaway(lastStreamId: Int32, errorCode: UInt32) {
        goaway = (lastStreamId, errorCode)
    }

    func sessionReadBody(streamId: Int32, into buffer: UnsafeMutableRawBufferPointer, eof: inout Bool) -> Int {
        guard let stream = streams[streamId] else { return -1 }
        let n = min(buffer.count, stream.body.count - stream.bodyOffset)
        stream.body.withUnsafeBytes { body in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: body[stream.bodyOffset..<(stream.bodyOffset + n)]))
        }
        stream.bodyOffset += n
        eof = stream.bodyOffset == stream.body.count
        return n
    }
}
