import Logging
import NIOCore
import NIOHTTP1
import Verifier

/// One request's way through the gateway: local handler or route match →
/// gate (policy hook) → upstream exchange → response back to the sink.
/// Loop-confined; created by a front end per stream/request.
final class RequestPipeline: UpstreamExchangeDelegate {
    private enum State {
        /// Buffering the body for a gate that asked for it.
        case bufferingForGate(RouteConfig, limit: Int)
        /// Buffering the body for a local handler.
        case bufferingForLocal(any LocalHandler)
        case awaitingGate(RouteConfig)
        case awaitingLocal
        /// Waiting for an upstream connection.
        case leasing(RouteConfig, attempt: Int)
        case forwarding(UpstreamConnection)
        /// Answer sent or being sent by the gateway; request body is discarded.
        case answered
        case done
    }

    private var state: State
    private let request: ProxyRequest
    private let bodyInfo: RequestBodyInfo
    /// Strong: the cycle with the sink is broken when the sink drops the pipeline (pipelineFinished/abort).
    private let sink: ResponseSink
    private let worker: Worker
    private var upstreamHead: UpstreamRequestHead?

    private var requestEnded: Bool
    private var bodyReceived = 0
    /// Body chunks not yet written upstream (bounded by the sink's flow control).
    /// Usually empty (no allocation); bounded by the sink's flow control when not.
    private var pendingBody: [ByteBuffer] = []
    private var bodyBuffer: ByteBuffer?
    /// A body the gate buffered (and the window already gave back), waiting for the upstream.
    private var bufferedForUpstream: ByteBuffer?
    private var responseStarted = false
    private var responseFinished = false
    private var clientGone = false
    private var upstreamPaused = false
    // For the observer (only read when one is installed).
    private var startedAt: NIODeadline?
    private var sentStatus = 0
    private var answeredReason: ReasonToken?
    private var upstreamName: String?
    /// The trust level the gate forwarded with (`<prefix>Trust`), for metrics.
    private var trustValue: String?
    /// Why a request was forwarded unverified (the `<prefix>Reason` it carried).
    private var forwardedReason: ReasonToken?
    /// The attest route's failed check, for the log.
    private var answeredDetail: String?
    private var aborted = false
    private var replayed = false
    private var discarded = 0
    static let maxDiscardBytes = 256 << 10
    /// Refused from its head by the front end (e.g. a header spelled with `_`
    /// under `underscoresInHeaders: reject`): answered by `start`.
    private let refusal: ReasonToken?
    /// Bytes of this request's body counted against the worker's buffering
    /// budget (`limits.maxBufferedBodyBytes`).
    private var bufferReserved = 0
    /// Body bytes received and not yet taken by the upstream (queued, or
    /// written and not yet flushed): the gateway, not the client, is behind.
    private var bodyHeld = 0
    private var bodyClock: BodyClock?

    init(
        request: ProxyRequest, body: RequestBodyInfo, sink: ResponseSink, worker: Worker, refusal: ReasonToken? = nil
    ) {
        self.request = request
        self.bodyInfo = body
        self.sink = sink
        self.worker = worker
        self.requestEnded = body.isEmpty
        self.refusal = refusal
        self.state = .answered
        if worker.observer != nil { startedAt = .now() }
    }

    private var snapshot: GatewaySnapshot { request.snapshot }

    // MARK: front end → pipeline

    func start() {
        if let refusal { return answer(refusal) }
        if case .contentLength(let n) = bodyInfo.framing, n > snapshot.config.limits.maxRequestBodyBytes {
            answer(.bodyTooLarge)
            return
        }
        if !requestEnded { startBodyClock() }
        let path = request.path
        for handler in worker.localHandlers where handler.claims(path: path, snapshot: snapshot) {
            guard reserveBuffer(upTo: handler.maxBodyBytes) else { return }
            state = .bufferingForLocal(handler)
            if requestEnded { runLocal(handler) }
            return
        }
        let route: RouteConfig
        switch snapshot.select(method: request.method, path: path) {
        case .route(let r): route = r
        case .noRoute: return answer(.noRoute)
        case .ambiguous: return answer(.malformedRequest)
        }
        // Labels the request's metrics with its route even when the gate rejects it.
        upstreamName = route.upstream
        switch worker.gate.bodyPolicy(for: request, route: route) {
        case .stream:
            runGate(route, body: nil)
        case .buffer(let limit):
            let limit = min(limit, snapshot.config.limits.maxRequestBodyBytes)
            guard reserveBuffer(upTo: limit) else { return }
            state = .bufferingForGate(route, limit: limit)
            if requestEnded { runGate(route, body: bodyBuffer ?? sink.allocator.buffer(capacity: 0)) }
        }
    }

    /// Reserves the announced body (at most `limit`) in the worker's budget;
    /// a body of unknown length reserves as it arrives (`appendToBodyBuffer`).
    /// False: answered `503 gateway-busy`.
    private func reserveBuffer(upTo limit: Int) -> Bool {
        guard case .contentLength(let n) = bodyInfo.framing else { return true }
        return growBufferReservation(to: min(n, limit))
    }

    private func growBufferReservation(to bytes: Int) -> Bool {
        guard bytes > bufferReserved else { return true }
        guard worker.reserveBufferedBody(bytes - bufferReserved) else {
            answer(.gatewayBusy, extraHeaders: [("retry-after", "1")])
            return false
        }
        bufferReserved = bytes
        return true
    }

    private func releaseBufferReservation() {
        guard bufferReserved > 0 else { return }
        worker.releaseBufferedBody(bufferReserved)
        bufferReserved = 0
    }

    func receiveBody(_ buffer: ByteBuffer) {
        let n = buffer.readableBytes
        bodyReceived += n
        bodyClock?.received(at: .now())
        switch state {
        case .bufferingForGate(_, let limit):
            sink.requestBodyConsumed(n)
            guard bodyReceived <= limit else { return answer(.bodyTooLarge) }
            guard growBufferReservation(to: bodyReceived) else { return }
            appendToBodyBuffer(buffer)
        case .bufferingForLocal(let handler):
            sink.requestBodyConsumed(n)
            guard bodyReceived <= handler.maxBodyBytes else { return answer(.bodyTooLarge) }
            guard growBufferReservation(to: bodyReceived) else { return }
            appendToBodyBuffer(buffer)
        case .answered, .done, .awaitingLocal:
            sink.requestBodyConsumed(n)
        case .awaitingGate, .leasing:
            guard checkStreamLimit() else { return }
            bodyHeld += n
            pendingBody.append(buffer)
        case .forwarding(let conn):
            guard checkStreamLimit() else { return }
            bodyHeld += n
            writeBody(buffer, to: conn)
        }
    }

    /// The front end could not read the body (an invalid chunk): `400
    /// malformed-request`, and an upstream that already has the head is
    /// closed on, so it never takes the truncated body for a whole one.
    func receiveMalformedBody() {
        guard !requestEnded else { return }
        requestEnded = true
        stopBodyClock()
        if responseStarted { fail() } else { answer(.malformedRequest) }
    }

    func receiveEnd() {
        if requestEnded { return }
        requestEnded = true
        stopBodyClock()
        switch state {
        case .bufferingForGate(let route, _):
            runGate(route, body: bodyBuffer ?? sink.allocator.buffer(capacity: 0))
        case .bufferingForLocal(let handler):
            runLocal(handler)
        case .forwarding(let conn):
            conn.sendEnd()
        default:
            break
        }
    }

    /// The client reset the stream or closed the connection (or the front end
    /// gave up on it: a stalled write).
    func downstreamAborted() {
        clientGone = true
        stopBodyClock()
        switch state {
        case .forwarding(let conn):
            if requestEnded, pendingBody.isEmpty, !conn.isClosed, !upstreamPaused {
                // The request is complete upstream: let the exchange finish (the answer is
                // discarded, at most `maxDiscardBytes`) so the keep-alive connection survives
                // a reset storm, within the upstream's response timeout from now. Until then
                // the request still counts against the connection's stream limit.
                conn.drainForLeavingClient()
                return
            }
            // Mid-request, or the response was held back for this client
            // (paused reads never resume): the connection cannot be reused.
            conn.abandon()
        case .awaitingGate, .awaitingLocal:
            // The gate/local work keeps running: the request still counts against the
            // connection's stream limit until it ends (see the completion handlers).
            return
        default:
            break
        }
        state = .done
        finish()
    }

    /// The downstream drained its buffer: resume reading from the upstream.
    func downstreamDrained() {
        guard upstreamPaused, case .forwarding(let conn) = state else { return }
        upstreamPaused = false
        conn.resumeReads()
    }

    // MARK: request-body clock

    private func startBodyClock() {
        let limits = snapshot.config.limits
        let clock = BodyClock(
            now: .now(), timeout: limits.requestBodyTimeout, minRate: limits.minRequestBodyRate, received: bodyReceived)
        bodyClock = clock
        armBodyTimer(clock.deadline(received: bodyReceived))
    }

    private func stopBodyClock() {
        bodyTimer?.cancel()
        bodyTimer = nil
        bodyClock = nil
    }

    private var bodyTimer: Scheduled<Void>?

    private func armBodyTimer(_ deadline: NIODeadline) {
        let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
        bodyTimer = worker.eventLoop.scheduleTask(deadline: deadline) { bound.value.bodyTimerFired() }
    }

    private func bodyTimerFired() {
        bodyTimer = nil
        guard var clock = bodyClock, !requestEnded, !finished else { return }
        let now = NIODeadline.now()
        if gatewayIsBehind {
            // The body waits on the gateway (a store answer, a free upstream
            // connection, an upstream slow to take it): not the client's fault.
            clock.restart(now: now, received: bodyReceived)
        }
        let due = clock.deadline(received: bodyReceived)
        bodyClock = clock
        if due > now { return armBodyTimer(due) }
        bodyClock = nil
        worker.observer?.timedOut(.requestBody)
        if responseStarted { fail() } else { answer(.requestTimeout) }
    }

    private var gatewayIsBehind: Bool {
        switch state {
        case .awaitingGate, .leasing: return true
        case .forwarding: return bodyHeld >= Self.heldBodyMeansBehind
        default: return false
        }
    }
    /// A client blocked by back-pressure has filled its window (HTTP/2 gives
    /// a stream 256 KiB) or the socket: far more than a trickle leaves in flight.
    static let heldBodyMeansBehind = 32 << 10

    // MARK: steps

    private func appendToBodyBuffer(_ buffer: ByteBuffer) {
        if bodyBuffer == nil {
            bodyBuffer = buffer
        } else {
            var incoming = buffer
            bodyBuffer?.writeBuffer(&incoming)
        }
    }

    private func checkStreamLimit() -> Bool {
        guard bodyReceived > snapshot.config.limits.maxRequestBodyBytes else { return true }
        if responseStarted {
            fail()
        } else {
            answer(.bodyTooLarge)
        }
        return false
    }

    private func runGate(_ route: RouteConfig, body: ByteBuffer?) {
        state = .awaitingGate(route)
        switch worker.gate.evaluate(request, route: route, body: body) {
        case .decided(let decision):
            apply(decision, route: route, body: body)
        case .pending(let future):
            let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
            future.hop(to: worker.eventLoop).whenComplete { result in
                let me = bound.value
                guard case .awaitingGate = me.state else { return }
                if me.clientGone { return me.abandonAfterWork() }
                switch result {
                case .success(let decision): me.apply(decision, route: route, body: body)
                case .failure: me.answer(.storeUnavailable)
                }
            }
        }
    }

    private func apply(_ decision: GateDecision, route: RouteConfig, body: ByteBuffer?) {
        switch decision {
        case .reject(let reason, let extra):
            answer(reason, extraHeaders: extra)
        case .forward(let extra):
            let trustName = snapshot.trustHeaderName
            trustValue = extra.first(where: { $0.0 == trustName })?.1
            if trustValue != "verified", trustValue != "none" {
                let reasonName = snapshot.reasonHeaderName
                forwardedReason = extra.first(where: { $0.0 == reasonName }).flatMap { ReasonToken(rawValue: $0.1) }
            }
            // Already counted as consumed when it arrived: written without credit.
            if let body, body.readableBytes > 0 { bufferedForUpstream = body }
            bodyBuffer = nil
            let framing: RequestBodyFraming
            if body != nil {
                framing = (bodyInfo.framing == .none && (body?.readableBytes ?? 0) == 0) ? .none : .contentLength(body?.readableBytes ?? 0)
            } else {
                framing = bodyInfo.framing
            }
            // The Host fallback is only needed when the client gave no authority.
            let fallbackHost = request.authority != nil ? nil : snapshot.config.upstreams[route.upstream]?.endpoints.first.map {
                HostPort(host: $0.host, port: $0.port).description
            }
            guard
                let head = HeaderRewriter.upstreamRequestHead(
                    method: request.method, target: request.target, client: request.headers,
                    authority: request.authority, route: route, snapshot: snapshot, requestId: request.requestId,
                    clientAddress: request.clientAddress, scheme: request.scheme, extra: extra, bodyFraming: framing,
                    fallbackHost: fallbackHost, allocator: sink.allocator)
            else {
                // A name, value or target NIO's validator would refuse: nothing is sent.
                answer(.upstreamUnavailable)
                return
            }
            upstreamHead = head
            lease(route, attempt: 0)
        }
    }

    private func lease(_ route: RouteConfig, attempt: Int) {
        upstreamName = route.upstream
        guard let upstream = snapshot.config.upstreams[route.upstream] else {
            answer(.upstreamUnavailable)
            return
        }
        state = .leasing(route, attempt: attempt)
        worker.upstreams.lease(
            name: route.upstream, config: upstream, tls: snapshot.upstreamTLS[route.upstream],
            client: request.clientAddress, delegate: self)
    }

    private func runLocal(_ handler: any LocalHandler) {
        state = .awaitingLocal
        let body = bodyBuffer ?? sink.allocator.buffer(capacity: 0)
        bodyBuffer = nil
        let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
        handler.handle(request, body: body).hop(to: worker.eventLoop).whenComplete { result in
            let me = bound.value
            guard case .awaitingLocal = me.state else { return }
            if me.clientGone { return me.abandonAfterWork() }
            switch result {
            case .success(let response):
                me.state = .answered
                me.answeredReason = response.reason
                me.answeredDetail = response.detail
                var headers = HTTPHeaders()
                for (n, v) in response.headers where !ASCII.equalsCI(n, "x-request-id") {
                    headers.add(name: n, value: v)
                }
                headers.add(name: "x-request-id", value: me.request.requestId)
                // A known length, so HTTP/1.1 clients get no chunked framing for a few bytes.
                if !headers.contains(name: "content-length") {
                    headers.add(name: "content-length", value: String(response.body.readableBytes))
                }
                me.respond(status: response.status, headers: headers, body: response.body)
            case .failure:
                me.answer(.storeUnavailable)
            }
        }
    }

    private func writeBody(_ buffer: ByteBuffer, to conn: UpstreamConnection) {
        let n = buffer.readableBytes
        let promise = worker.eventLoop.makePromise(of: Void.self)
        let sinkRef = NIOLoopBound(self, eventLoop: worker.eventLoop)
        promise.futureResult.whenSuccess { sinkRef.value.bodyTaken(n) }
        conn.sendBody(buffer, promise: promise)
    }

    private func bodyTaken(_ n: Int) {
        bodyHeld -= n
        guard !clientGone else { return }
        sink.requestBodyConsumed(n)
    }

    /// Answer with a problem+json (only while no response has started).
    private func answer(_ reason: ReasonToken, extraHeaders: [(String, String)] = []) {
        if case .forwarding(let conn) = state { conn.abandon() }
        state = .answered
        stopBodyClock()
        // Whatever was queued for the upstream is discarded: give the window back.
        var queued = 0
        for b in pendingBody { queued += b.readableBytes }
        pendingBody.removeAll()
        bodyHeld -= queued
        if queued > 0 { sink.requestBodyConsumed(queued) }
        bodyBuffer = nil
        bufferedForUpstream = nil
        releaseBufferReservation()
        guard !responseStarted, !clientGone else {
            if responseStarted { fail() } else { finish() }
            return
        }
        answeredReason = reason
        let body = ProblemResponse.body(reason, requestId: request.requestId, allocator: sink.allocator)
        var headers = HTTPHeaders()
        for (n, v) in ProblemResponse.headers(
            bodyLength: body.readableBytes, requestId: request.requestId, extra: extraHeaders)
        {
            headers.add(name: n, value: v)
        }
        if reason == .methodNotAllowed, !extraHeaders.contains(where: { ASCII.equalsCI($0.0, "allow") }) {
            headers.add(name: "allow", value: "POST")
        }
        respond(status: reason.httpStatus, headers: headers, body: body)
    }

    private func respond(status: Int, headers: HTTPHeaders, body: ByteBuffer) {
        responseStarted = true
        sentStatus = status
        responseFinished = true
        report()
        let isHead = request.method == "HEAD"
        if body.readableBytes == 0 || isHead {
            sink.sendResponseHead(status: status, headers: headers, endStream: true)
        } else {
            sink.sendResponseHead(status: status, headers: headers, endStream: false)
            sink.sendResponseBody(body)
            sink.sendResponseEnd()
        }
        finish()
    }

    /// Asynchronous work finished for a client that already went away.
    private func abandonAfterWork() {
        state = .done
        finish()
    }

    /// The response cannot be completed.
    private func fail() {
        if case .forwarding(let conn) = state { conn.abandon() }
        state = .done
        aborted = true
        if !clientGone { sink.abortResponse() }
        finish()
    }

    private var finished = false
    private func finish() {
        guard !finished else { return }
        finished = true
        if case .answered = state {} else { state = .done }
        stopBodyClock()
        releaseBufferReservation()
        // Anything still queued is dropped.
        pendingBody.removeAll()
        bufferedForUpstream = nil
        report()
        sink.pipelineFinished()
    }

    private var reported = false
    /// Counts and logs the request, once. A complete response is reported
    /// before its last bytes are handed to the front end: HTTP/1.1 writes them
    /// at once, so a client holding its answer then also finds it in
    /// `/metrics` and the log, as it does on HTTP/2 (nghttp2 sends later).
    private func report() {
        guard !reported else { return }
        reported = true
        if let observer = worker.observer {
            let elapsed = startedAt.map { (NIODeadline.now() - $0).nanoseconds } ?? 0
            observer.requestFinished(
                RequestSummary(
                    requestId: request.requestId, method: request.method, target: request.target,
                    upstream: upstreamName, status: clientGone && !responseFinished ? 0 : sentStatus,
                    reason: answeredReason, trust: trustValue, durationNanoseconds: elapsed,
                    aborted: aborted || (clientGone && !responseFinished), forwardedReason: forwardedReason,
                    detail: answeredDetail))
        }
    }

    // MARK: UpstreamExchangeDelegate

    func upstreamLeased(_ connection: UpstreamConnection) {
        guard case .leasing = state, !clientGone, let head = upstreamHead else {
            connection.releaseUnused()
            return
        }
        state = .forwarding(connection)
        // Kept only for bodiless requests: they may be replayed on a stale keep-alive connection.
        if !bodyInfo.isEmpty { upstreamHead = nil }
        let endNow = requestEnded && pendingBody.isEmpty && bufferedForUpstream == nil
        connection.sendHead(head, end: endNow)
        if endNow { return }
        if let buffered = bufferedForUpstream {
            bufferedForUpstream = nil
            connection.sendBody(buffered, promise: nil)
        }
        let queued = pendingBody
        pendingBody.removeAll()
        for b in queued { writeBody(b, to: connection) }
        // A buffered body is in the socket's hands now.
        releaseBufferReservation()
        if requestEnded { connection.sendEnd() }
    }

    func upstreamLeaseFailed(_ error: UpstreamError) {
        guard case .leasing(let route, let attempt) = state, !clientGone else { return }
        let endpoints = snapshot.config.upstreams[route.upstream]?.endpoints.count ?? 0
        if error.isConnectFailure, attempt + 1 < max(2, endpoints), isIdempotent {
            worker.logger.debug("retrying upstream connect", metadata: ["requestId": "\(request.requestId)"])
            lease(route, attempt: attempt + 1)
            return
        }
        answer(error.reason)
    }

    private var isIdempotent: Bool {
        switch request.method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": return true
        default: return false
        }
    }

    func upstreamResponseHead(_ head: UpstreamResponseHead) {
        guard case .forwarding = state else { return }
        responseStarted = true
        sentStatus = head.status
        if clientGone { return }
        sink.sendUpstreamResponseHead(head, requestId: request.requestId)
    }

    func upstreamResponseBody(_ buffer: ByteBuffer) {
        guard case .forwarding(let conn) = state else { return }
        if clientGone {
            // Draining for a client that left: give up on large bodies.
            discarded += buffer.readableBytes
            if discarded > Self.maxDiscardBytes {
                conn.abandon()
                state = .done
                finish()
            }
            return
        }
        sink.sendResponseBody(buffer)
        if sink.isCongested, !upstreamPaused {
            upstreamPaused = true
            conn.pauseReads()
        }
    }

    func upstreamResponseEnd() {
        guard case .forwarding = state else { return }
        state = .done
        responseFinished = true
        report()
        if !clientGone { sink.sendResponseEnd() }
        finish()
    }

    func upstreamFailed(_ error: UpstreamError) {
        guard case .forwarding(let conn) = state else { return }
        // A pooled connection the upstream had already closed (keep-alive race): nothing
        // was answered, the request had no body and is idempotent, so send it again once.
        if error == .connectionLost, !responseStarted, conn.exchanges > 1, !conn.responseStarted,
            bodyInfo.isEmpty, isIdempotent, !replayed, upstreamHead != nil,
            let route = snapshot.route(method: request.method, path: request.path)
        {
            replayed = true
            worker.logger.debug("replaying on a fresh connection", metadata: ["requestId": "\(request.requestId)"])
            lease(route, attempt: 1)
            return
        }
        state = .done
        if responseStarted {
            fail()
        } else {
            state = .answered
            answer(error.reason)
        }
    }
}

/// When a request body that is still arriving has taken too long: no byte
/// for `timeout`, or (after `timeout`) an average below `minRate` bytes per
/// second since the clock started. One deadline, recomputed when the timer
/// fires, so a body costs one scheduled task, not one per chunk.
struct BodyClock {
    private var startedAt: NIODeadline
    private var receivedAtStart: Int
    private var lastByteAt: NIODeadline
    let timeout: TimeAmount
    let minRate: Int

    init(now: NIODeadline, timeout: TimeAmount, minRate: Int, received: Int) {
        self.startedAt = now
        self.receivedAtStart = received
        self.lastByteAt = now
        self.timeout = timeout
        self.minRate = minRate
    }

    mutating func received(at now: NIODeadline) { lastByteAt = now }

    /// The clock starts over (the gateway held the body back until now).
    mutating func restart(now: NIODeadline, received: Int) {
        startedAt = now
        receivedAtStart = received
        lastByteAt = now
    }

    /// The earlier of: the last byte + `timeout`; the moment the average rate
    /// falls below `minRate` (never before `timeout` has passed).
    func deadline(received: Int) -> NIODeadline {
        let quiet = lastByteAt + timeout
        guard minRate > 0 else { return quiet }
        let bytes = Int64(max(0, received - receivedAtStart))
        // bytes / elapsed >= minRate  ⇔  elapsed <= bytes / minRate
        let (scaled, overflow) = bytes.multipliedReportingOverflow(by: 1_000_000_000)
        let allowed = overflow ? TimeAmount.hours(24) : TimeAmount.nanoseconds(scaled / Int64(minRate))
        let slow = startedAt + max(timeout, allowed)
        return min(quiet, slow)
    }
}
