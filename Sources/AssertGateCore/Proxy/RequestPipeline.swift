import Logging
import NIOCore
import NIOHTTP1
import Verifier

/// One request's way through the gateway: local handler or route match →
/// gate (policy hook) → upstream exchange → response back to the sink.
/// Loop-confined; created by a front end per stream/request.
///
/// Three pieces of state, each an enum changed only by its transitions:
/// `stage` (what the gateway is doing with the request), and the request and
/// response halves of `exchange` (what the client has sent and been sent).
final class RequestPipeline: UpstreamExchangeDelegate {
    /// Whoever decides a request before anything goes upstream.
    enum Decider {
        /// The route's gate (verification, policy).
        case gate(RouteConfig)
        /// A route the gateway serves itself (challenge, attest).
        case local(any LocalHandler)
    }

    enum Stage {
        /// Made; `start` not yet called.
        case idle
        /// Buffering the body (at most `limit` bytes) for the decider.
        case buffering(Decider, limit: Int)
        /// The decider is at work. Body bytes arriving for the gate wait in
        /// `pendingBody`; the client's window is held until the upstream takes them.
        case deciding(Decider)
        /// Waiting for an upstream connection.
        case leasing(RouteConfig, attempt: Int)
        case forwarding(any UpstreamExchange)
        /// The client left after its whole request went upstream: the
        /// exchange finishes, its answer discarded (`discarded` bytes so far),
        /// so the keep-alive connection survives a reset storm.
        case draining(any UpstreamExchange, discarded: Int)
        /// Answered, forwarded to the end, or given up: body bytes still
        /// arriving are discarded.
        case finished
    }

    private(set) var stage: Stage = .idle
    private(set) var exchange: ExchangeState
    private let request: ProxyRequest
    private let bodyInfo: RequestBodyInfo
    /// Strong: the cycle with the sink is broken when the sink drops the pipeline (pipelineFinished/abort).
    private let sink: ResponseSink
    private let worker: Worker
    /// Refused from its head by the front end (e.g. a header spelled with `_`
    /// under `underscoresInHeaders: reject`): answered by `start`.
    private let refusal: Rejection?
    private var record: RequestRecord

    // Body bookkeeping (sizes and buffers, not state: `stage` says what they mean).
    private var bodyReceived = 0
    /// Body chunks not yet written upstream (`deciding` the gate, `leasing`,
    /// and while `forwarding` until the end of the event-loop pass they
    /// came in). Usually empty (no allocation); bounded by the sink's flow
    /// control when not.
    private var pendingBody: [ByteBuffer] = []
    /// A write of `pendingBody` is due at the end of this event-loop pass.
    private var bodyFlushScheduled = false
    /// The body buffered for the decider (`buffering`).
    private var bodyBuffer: ByteBuffer?
    /// A body the gate buffered (and the window already gave back), waiting for the upstream.
    private var bufferedForUpstream: ByteBuffer?
    /// The head sent upstream, kept for a bodiless request that may be replayed
    /// once on a fresh connection (a stale keep-alive connection).
    private var upstreamHead: UpstreamHead?
    /// For an HTTP/2 upstream, the body sent so far (at most
    /// `maxReplayBodyBytes`), kept until the response starts: a stream the
    /// server refused unprocessed (a GOAWAY race) is sent again whole.
    /// `keepForReplay` goes false when the body outgrows it.
    private var replayBody: ByteBuffer?
    private var keepForReplay = false
    /// Times the request was sent again (a stale keep-alive connection once; a
    /// refused HTTP/2 stream up to `maxRefusedReplays`).
    private var replays = 0
    static let maxReplayBodyBytes = 64 << 10
    static let maxRefusedReplays = 3
    /// Request trailers (HTTP/2 client) waiting for the upstream exchange.
    private var pendingTrailers: HTTPHeaders?
    /// The request's trailers, kept with `replayBody` for a refused stream's
    /// replay (they may have gone to the refused stream already).
    private var replayTrailers: HTTPHeaders?
    /// The route the request was leased for: a replay goes where the first
    /// try went (its head was built for that route's upstream and protocol;
    /// a second lookup by the raw path could pick another route).
    private var leasedRoute: RouteConfig?
    /// Bytes of this request's body counted against the worker's buffering
    /// budget (`limits.maxBufferedBodyBytes`).
    private var bufferReserved = 0
    /// Body bytes received and not yet taken by the upstream (queued, or
    /// written and not yet flushed): the gateway, not the client, is behind.
    private var bodyHeld = 0
    /// When the upstream last took body bytes (or was leased): an upstream
    /// that takes none for the request's response timeout while the client
    /// is held back by them is answered `504 upstream-timeout`, as nginx's
    /// `proxy_send_timeout` does. The response deadline starts only once the
    /// request is sent, and the body clock waits while the gateway is behind.
    /// Seen by the body timer when it fires (no clock read per chunk):
    /// `bodyTakenTotal` moved since the last look means progress then.
    private var upstreamTookBodyAt: NIODeadline?
    private var upstreamSendTimeout: TimeAmount = .seconds(30)
    /// Interim heads passed on (`upstreamInterimHead`).
    private var interimHeads = 0
    private var bodyTakenTotal = 0
    private var bodyTakenSeen = 0
    /// The global body limits, or the route's own (`routes[].limits`) once it is known.
    private var bodyLimits: BodyLimits
    /// The key an operator raises when a body is over `bodyLimits.maxBytes`.
    private var bodyLimitName = "limits.maxRequestBodyBytes"
    private var bodyClock: BodyClock?
    private var bodyTimer: Scheduled<Void>?
    private var bodyTimerDeadline: NIODeadline?
    /// The route's DeviceCheck work (risk.md §3): started with the head, in
    /// parallel with the body and the assertion; nil once arrived or unused.
    private var device: DeviceCheckOutcome?
    /// The gate decided before DeviceCheck answered: applied when it does.
    private var heldDecision: (decision: GateDecision, route: RouteConfig, body: ByteBuffer?)?
    /// The request carries assertion headers (risk.md §6.17): judged by them,
    /// never by `fallback: device`.
    private var asserted = false
    /// The upstream's response, held back until the bit update it asked for
    /// is queued in the store (risk.md §3: before the head goes out).
    private var heldResponse: (head: UpstreamResponseHead, parts: [ByteBuffer], trailers: HTTPHeaders?, ended: Bool)?

    static let maxDiscardBytes = 256 << 10

    init(
        request: ProxyRequest, body: RequestBodyInfo, sink: ResponseSink, worker: Worker, refusal: Rejection? = nil
    ) {
        // `request` is read before it is stored: a read after the store would
        // make the store a copy (its strings retained, then released).
        self.bodyLimits = BodyLimits(request.snapshot.config.limits)
        self.request = request
        self.bodyInfo = body
        self.sink = sink
        self.worker = worker
        self.refusal = refusal
        self.exchange = ExchangeState(requestComplete: body.isEmpty)
        self.record = RequestRecord(startedAt: worker.observer != nil ? .now() : nil)
    }

    private var snapshot: GatewaySnapshot { request.snapshot }
    private var isFinished: Bool {
        if case .finished = stage { return true }
        return false
    }

    // MARK: front end → pipeline

    func start() {
        guard case .idle = stage else { preconditionFailure("start called twice") }
        worker.openRequests.add(1)
        if let refusal { return answer(refusal) }
        let path = request.path
        for handler in worker.localHandlers where handler.claims(path: path, snapshot: snapshot) {
            guard admitBody() else { return }
            return decide(.local(handler), bufferLimit: handler.maxBodyBytes)
        }
        let route: RouteConfig
        switch snapshot.select(method: request.method, path: path) {
        case .route(let r): route = r
        case .noRoute: return answer(Rejection(.noRoute))
        case .ambiguous: return answer(Rejection(.malformedRequest, "the path reads as two different routes"))
        }
        // Labels the request's metrics with its route even when the gate rejects it.
        record.upstream = route.upstream
        if !route.limits.isEmpty {
            bodyLimits = route.limits.body(snapshot.config.limits)
            if route.limits.maxRequestBodyBytes != nil { bodyLimitName = "the route's limits.maxRequestBodyBytes" }
        }
        guard admitBody() else { return }
        if route.deviceCheck != .none { startDeviceCheck(route) }
        switch worker.gate.bodyPolicy(for: request, route: route) {
        case .stream:
            runGate(route, body: nil)
        case .buffer(let limit):
            decide(.gate(route), bufferLimit: min(limit, bodyLimits.maxBytes))
        }
    }

    /// A body announced over the request's limit is refused before a byte of
    /// it is read; one still to come starts its clock.
    private func admitBody() -> Bool {
        if case .contentLength(let n) = bodyInfo.framing, n > bodyLimits.maxBytes {
            answer(Rejection(.bodyTooLarge, "content-length over \(bodyLimitName)"))
            return false
        }
        if !exchange.requestIsComplete { startBodyClock() }
        return true
    }


    /// Buffers the body for `decider`, which runs once it is complete.
    private func decide(_ decider: Decider, bufferLimit: Int) {
        guard reserveBuffer(upTo: bufferLimit) else { return }
        stage = .buffering(decider, limit: bufferLimit)
        if exchange.requestIsComplete { runDecider(decider) }
    }

    func receiveBody(_ buffer: ByteBuffer) {
        let n = buffer.readableBytes
        if n > 0, bodyInfo.isEmpty {
            // The front end's parser found a body where the intake framed none:
            // it must never reach an upstream that was told there is none.
            sink.requestBodyConsumed(n)
            guard !isFinished else { return }
            worker.logger.warning(
                "request body where its head announced none; refused",
                metadata: ["requestId": "\(request.requestId)"])
            return exchange.responseStarted ? fail() : answer(Rejection(.malformedRequest, "a body its head did not announce"))
        }
        bodyReceived += n
        bodyClock?.received(at: worker.eventLoop.now)
        switch stage {
        case .buffering(_, let limit):
            sink.requestBodyConsumed(n)
            guard bodyReceived <= limit else { return answer(Rejection(.bodyTooLarge, "body over the route's limit")) }
            guard growBufferReservation(to: bodyReceived) else { return }
            appendToBodyBuffer(buffer)
        case .idle, .finished, .draining, .deciding(.local):
            sink.requestBodyConsumed(n)
        case .deciding(.gate), .leasing:
            // A chunk past the limit is dropped: its bytes are given back.
            guard checkStreamLimit() else { return sink.requestBodyConsumed(n) }
            bodyHeld += n
            holdBody(buffer)
        case .forwarding:
            guard checkStreamLimit() else { return sink.requestBodyConsumed(n) }
            bodyHeld += n
            // Written at the end of this event-loop pass, small chunks joined:
            // a client sending 1-byte DATA frames or chunks cost a write, a
            // flush and a promise each (4.5 µs of gateway CPU a frame, nghttpx
            // 0.14: BENCHMARKS §6d), and a buffer each while a slow upstream
            // was not reading.
            holdBody(buffer)
            scheduleBodyFlush()
        }
    }

    private func scheduleBodyFlush() {
        guard !bodyFlushScheduled else { return }
        bodyFlushScheduled = true
        let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
        worker.eventLoop.execute { bound.value.flushPendingBody() }
    }

    /// Writes what `receiveBody` held while forwarding (anything else holds
    /// it for `upstreamLeased`, which writes it then).
    private func flushPendingBody() {
        bodyFlushScheduled = false
        guard case .forwarding(let conn) = stage else { return }
        writePendingBody(to: conn)
    }

    /// Hands the held chunks to `conn`, in order (taken out first: a write
    /// that fails at once may answer, and drop what is still held).
    private func writePendingBody(to conn: any UpstreamExchange) {
        guard !pendingBody.isEmpty else { return }
        let queued = pendingBody
        pendingBody.removeAll(keepingCapacity: true)
        for b in queued { writeBody(b, to: conn) }
    }

    /// Held while the gate decides or a connection comes: a small chunk joins
    /// the one before. Flow control counts bytes, not chunks, so a client
    /// sending 1-byte DATA frames or chunks made each a buffer of its own,
    /// about 130 times its size: a full window cost 130 MiB.
    private func holdBody(_ buffer: ByteBuffer) {
        if buffer.readableBytes < Self.smallChunk, !pendingBody.isEmpty {
            let last = pendingBody.count - 1
            if pendingBody[last].readableBytes < Self.joinedChunk {
                var chunk = buffer
                pendingBody[last].writeBuffer(&chunk)
                return
            }
        }
        pendingBody.append(buffer)
    }

    static let smallChunk = 4096
    static let joinedChunk = 16384

    /// Buffers held for the body (tests).
    var heldBodyBuffers: Int { pendingBody.count }

    /// The front end could not read the body (an invalid chunk): `400
    /// malformed-request`, and an upstream that already has the head is
    /// closed on, so it never takes the truncated body for a whole one.
    func receiveMalformedBody() {
        guard exchange.completeRequest() else { return }
        stopBodyClock()
        if exchange.responseStarted { fail() } else { answer(Rejection(.malformedRequest, "invalid chunked framing")) }
    }

    /// The client's trailers (HTTP/2): forwarded to an HTTP/2 upstream
    /// before the end, without the names only the gateway may set.
    func receiveTrailers(_ fields: HTTPHeaders) {
        guard !exchange.requestIsComplete else { return }
        let kept = Self.filterTrailers(
            fields, prefix: snapshot.trustPrefixLower, dropUnderscores: snapshot.config.limits.underscoresInHeaders != .allow)
        guard !kept.isEmpty else { return }
        switch stage {
        case .forwarding(let conn):
            if keepForReplay { replayTrailers = kept }
            flushPendingBody()
            conn.sendTrailers(kept)
        case .finished, .draining: break
        default: pendingTrailers = kept
        }
    }

    /// Trailers either way lose hop-by-hop fields, pseudo-headers, the
    /// forwarding names and every trust-prefixed name, also spelled with `_`
    /// for `-`: a trailer must never say what only the gateway may (a server
    /// that merges trailers into headers would read it as the gateway's
    /// word). A client's names with `_` go unless `underscoresInHeaders:
    /// allow` (`reject` cannot answer any more: the request is under way).
    static func filterTrailers(_ fields: HTTPHeaders, prefix: [UInt8], dropUnderscores: Bool = true) -> HTTPHeaders {
        var out = HTTPHeaders()
        for (name, value) in fields {
            if name.utf8.first == UInt8(ascii: ":") || HeaderRewriter.isHopByHop(name) { continue }
            if dropUnderscores, name.utf8.contains(UInt8(ascii: "_")) { continue }
            let folded = name.utf8.map { $0 == UInt8(ascii: "_") ? UInt8(ascii: "-") : ASCII.lower($0) }
            if folded.starts(with: prefix) || HeaderRewriter.isReservedName(folded) { continue }
            out.add(name: name, value: value)
        }
        return out
    }

    func receiveEnd() {
        guard exchange.completeRequest() else { return }
        stopBodyClock()
        switch stage {
        case .buffering(let decider, _): runDecider(decider)
        case .forwarding(let conn):
            flushPendingBody()
            conn.sendEnd()
        default: break
        }
    }

    /// The client reset the stream or closed the connection (or the front end
    /// gave up on it: a stalled write).
    func downstreamAborted() {
        let heldBack = exchange.isPaused
        guard exchange.clientLeft() else { return }
        stopBodyClock()
        if let held = heldResponse, case .forwarding(let conn) = stage {
            // Waiting for a bit update to be queued (it still is). A response
            // the upstream finished left its connection in the pool: not
            // ours to touch any more; one still arriving has its reads paused.
            heldResponse = nil
            if !held.ended { conn.abandon() }
            return finish()
        }
        switch stage {
        case .forwarding(let conn):
            if exchange.requestIsComplete, pendingBody.isEmpty, !conn.isClosed, !heldBack, conn.drainForLeavingClient() {
                // The request is complete upstream: let the exchange finish (the answer is
                // discarded, at most `maxDiscardBytes`) so the keep-alive connection survives
                // a reset storm, within the upstream's response timeout from now. Until then
                // the request still counts against the connection's stream limit.
                stage = .draining(conn, discarded: 0)
                return
            }
            // Mid-request, or the response was held back for this client
            // (paused reads never resume): the connection cannot be reused.
            conn.abandon()
        case .deciding:
            // The gate/local work keeps running: the request still counts against the
            // connection's stream limit until it ends (see `decided`).
            return
        default:
            break
        }
        finish()
    }

    /// The downstream drained its buffer: resume reading from the upstream.
    func downstreamDrained() {
        guard case .forwarding(let conn) = stage, exchange.resume() else { return }
        conn.resumeReads()
    }

    // MARK: request-body clock

    private func startBodyClock() {
        let clock = BodyClock(
            now: worker.eventLoop.now, timeout: bodyLimits.timeout, minRate: bodyLimits.minRate, received: bodyReceived)
        bodyClock = clock
        armBodyTimer(clock.deadline(received: bodyReceived))
    }

    private func stopBodyClock() {
        bodyTimer?.cancel()
        bodyTimer = nil
        bodyTimerDeadline = nil
        bodyClock = nil
    }

    private func armBodyTimer(_ deadline: NIODeadline) {
        bodyTimerDeadline = deadline
        let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
        bodyTimer = worker.eventLoop.scheduleTask(deadline: deadline) { bound.value.bodyTimerFired() }
    }

    private func bodyTimerFired() {
        bodyTimer = nil
        guard var clock = bodyClock, !exchange.requestIsComplete, !isFinished else { return }
        let now = worker.eventLoop.now
        var upstreamDue: NIODeadline?
        if gatewayIsBehind {
            // The body waits on the gateway (a store answer, a free upstream
            // connection, an upstream slow to take it): not the client's fault.
            clock.restart(now: now, received: bodyReceived)
            if case .forwarding = stage, var took = upstreamTookBodyAt {
                if bodyTakenTotal != bodyTakenSeen {
                    bodyTakenSeen = bodyTakenTotal
                    took = now
                    upstreamTookBodyAt = now
                }
                let due = took + upstreamSendTimeout
                guard due > now else { return upstreamStoppedTakingBody() }
                // Takes are counted, not timed (no clock read per chunk): one
                // seen now happened since the last look. Looking every quarter
                // of the timeout dates it to within that, so the upstream is
                // given up on 1–1.25 timeouts after its last take, not up to 2.
                upstreamDue = min(due, now + upstreamLookInterval)
            }
        }
        var due = clock.deadline(received: bodyReceived)
        if let upstreamDue { due = min(due, upstreamDue) }
        bodyClock = clock
        if due > now { return armBodyTimer(due) }
        bodyClock = nil
        worker.observer?.timedOut(.requestBody)
        if exchange.responseStarted { fail() } else { answer(Rejection(.requestTimeout, "request body too slow")) }
    }

    /// The upstream took none of the body for the response timeout while the
    /// client waited on it: the upstream is at fault, as for a late answer.
    private func upstreamStoppedTakingBody() {
        bodyClock = nil
        let waited = DurationParser.format(upstreamSendTimeout)
        if exchange.responseStarted {
            fail()
        } else {
            answer(Rejection(.upstreamTimeout, "the upstream took none of the request body for \(waited)"))
        }
    }

    /// How often the body timer looks at an upstream taking the body.
    private var upstreamLookInterval: TimeAmount { .nanoseconds(upstreamSendTimeout.nanoseconds / 4) }

    private var gatewayIsBehind: Bool {
        switch stage {
        case .deciding(.gate), .leasing: return true
        case .forwarding: return bodyHeld >= Self.heldBodyMeansBehind
        default: return false
        }
    }
    /// A client blocked by back-pressure has filled its window (HTTP/2 gives
    /// a stream 256 KiB) or the socket: far more than a trickle leaves in flight.
    static let heldBodyMeansBehind = 32 << 10

    // MARK: body buffering

    /// Reserves the announced body (at most `limit`) in the worker's budget;
    /// a body of unknown length reserves as it arrives (`receiveBody`).
    /// False: answered `503 gateway-busy`.
    private func reserveBuffer(upTo limit: Int) -> Bool {
        guard case .contentLength(let n) = bodyInfo.framing else { return true }
        return growBufferReservation(to: min(n, limit))
    }

    private func growBufferReservation(to bytes: Int) -> Bool {
        guard bytes > bufferReserved else { return true }
        guard worker.reserveBufferedBody(bytes - bufferReserved) else {
            answer(Rejection(.gatewayBusy, "limits.maxBufferedBodyBytes reached on this worker", retryAfter: 1))
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

    private func appendToBodyBuffer(_ buffer: ByteBuffer) {
        if bodyBuffer == nil {
            bodyBuffer = buffer
        } else {
            var incoming = buffer
            bodyBuffer?.writeBuffer(&incoming)
        }
    }

    private func takeBodyBuffer() -> ByteBuffer {
        defer { bodyBuffer = nil }
        return bodyBuffer ?? sink.allocator.buffer(capacity: 0)
    }

    private func checkStreamLimit() -> Bool {
        guard bodyReceived > bodyLimits.maxBytes else { return true }
        if exchange.responseStarted {
            fail()
        } else {
            answer(Rejection(.bodyTooLarge, "body over \(bodyLimitName)"))
        }
        return false
    }

    // MARK: deciding

    private func runDecider(_ decider: Decider) {
        switch decider {
        case .gate(let route): runGate(route, body: takeBodyBuffer())
        case .local(let handler): runLocal(handler)
        }
    }

    private func runGate(_ route: RouteConfig, body: ByteBuffer?) {
        stage = .deciding(.gate(route))
        switch worker.gate.evaluate(request, route: route, body: body) {
        case .decided(let decision):
            apply(decision, route: route, body: body)
        case .pending(let future):
            let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
            future.hop(to: worker.eventLoop).whenComplete { result in
                let me = bound.value
                guard me.decided() else { return }
                switch result {
                case .success(let decision): me.apply(decision, route: route, body: body)
                case .failure: me.answer(Rejection(.storeUnavailable, "the gate failed"))
                }
            }
        }
    }

    private func runLocal(_ handler: any LocalHandler) {
        stage = .deciding(.local(handler))
        let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
        handler.handle(request, body: takeBodyBuffer()).hop(to: worker.eventLoop).whenComplete { result in
            let me = bound.value
            guard me.decided() else { return }
            switch result {
            case .success(let response): me.respond(response)
            case .failure: me.answer(Rejection(.storeUnavailable, "the local route failed"))
            }
        }
    }

    /// Asynchronous work finished: true when its result still matters (the
    /// request is still waiting for it and the client is still there).
    private func decided() -> Bool {
        guard case .deciding = stage else { return false }
        if exchange.clientIsGone {
            finish()
            return false
        }
        return true
    }

    private func startDeviceCheck(_ route: RouteConfig) {
        let names = snapshot.config.attestation.headers
        asserted = [names.keyId, names.assertion].contains { !(request.headers.first(name: $0) ?? "").isEmpty }
        let loop = worker.eventLoop
        let work: EventLoopFuture<DeviceCheckOutcome>
        if let service = worker.deviceCheck {
            let environment = worker.gate.keyEnvironment(for: request) ?? loop.makeSucceededFuture(nil)
            work = service.check(request, mode: route.deviceCheck, environment: environment)
        } else {
            // Unreachable through `serve` (a route with deviceCheck needs the section).
            work = loop.makeSucceededFuture(DeviceCheckOutcome(signal: .unavailable))
        }
        let bound = NIOLoopBound(self, eventLoop: loop)
        work.hop(to: loop).whenSuccess { bound.value.deviceArrived($0) }
    }

    private func deviceArrived(_ outcome: DeviceCheckOutcome) {
        device = outcome
        guard let held = heldDecision else { return }
        heldDecision = nil
        guard decided() else { return }
        apply(held.decision, route: held.route, body: held.body)
    }

    private func apply(_ decision: GateDecision, route: RouteConfig, body: ByteBuffer?) {
        var decision = decision
        if route.deviceCheck != .none {
            guard let device else {
                if case .reject(let rejection) = decision, asserted || route.fallback != .device {
                    // DeviceCheck cannot change a refused assertion: no need to wait.
                    return answer(rejection)
                }
                heldDecision = (decision, route, body)
                return
            }
            let gate = worker.gate
            decision = DevicePolicy.decide(decision, asserted: asserted, device: device.signal, route: route) {
                gate.ruleEvaluated($0, $1, route: route)
            }
        }
        switch decision {
        case .reject(let rejection):
            answer(rejection)
        case .forward(let outcome):
            record.outcome = outcome
            let resolved = route.resolvedUpstream
            let http2 = resolved?.config.isHTTP2 == true
            keepForReplay = http2
            // Already counted as consumed when it arrived: written without credit.
            if let body, body.readableBytes > 0 {
                bufferedForUpstream = body
                if keepForReplay { replayBody = body }
            }
            let framing: RequestBodyFraming
            if let body {
                framing = bodyInfo.framing == .none && body.readableBytes == 0 ? .none : .contentLength(body.readableBytes)
            } else {
                framing = bodyInfo.framing
            }
            // The Host fallback is only needed when the client gave no authority.
            let fallbackHost =
                request.authority != nil
                ? nil
                : resolved?.config.endpoints.first.map {
                    HostPort(host: $0.host, port: $0.port).description
                }
            let trust = snapshot.trustHeaders.headers(
                for: outcome, device: device?.signal, requestId: request.requestId, method: request.method,
                path: request.target, now: UnixClock.now())
            if http2 {
                upstreamHead = HeaderRewriter.upstreamH2Head(
                    for: request, route: route, extra: trust, bodyFraming: framing, fallbackHost: fallbackHost,
                    upstreamScheme: resolved?.config.endpoints.first?.tls == true ? "https" : "http",
                    trailers: Self.wantsTrailers(request.headers), forwarding: worker.forwarding
                ).map(UpstreamHead.http2)
            } else {
                upstreamHead = HeaderRewriter.upstreamRequestHead(
                    for: request, route: route, extra: trust, bodyFraming: framing, fallbackHost: fallbackHost,
                    allocator: sink.allocator, forwarding: worker.forwarding
                ).map(UpstreamHead.http1)
            }
            // A name, value or target the upstream's protocol cannot carry: nothing is sent.
            guard upstreamHead != nil else {
                return answer(Rejection(.upstreamUnavailable, "a header or the target cannot be sent upstream"))
            }
            lease(route, attempt: 0)
        }
    }

    /// Every route reaches the pipeline through the snapshot's selection,
    /// which resolved its upstream (nil: no upstream of that name).
    private func lease(_ route: RouteConfig, attempt: Int) {
        leasedRoute = route
        record.upstream = route.upstream
        guard let resolved = route.resolvedUpstream else {
            return answer(Rejection(.upstreamUnavailable, "no upstream named \(route.upstream)"))
        }
        stage = .leasing(route, attempt: attempt)
        // The route's own wait (a long-lived stream's), and a gRPC client's
        // deadline, set how long the gateway waits for this answer (this
        // request's alone: the pool keeps the upstream's own timeout).
        var responseTimeout = route.limits.responseTimeout
        if let cap = GRPCTimeout.parse(request.headers.first(name: "grpc-timeout")),
            cap < (responseTimeout ?? resolved.config.responseTimeout)
        {
            responseTimeout = cap
        }
        upstreamSendTimeout = responseTimeout ?? resolved.config.responseTimeout
        worker.upstreams.lease(
            name: route.upstream, upstream: resolved, client: request.clientAddress, responseTimeout: responseTimeout,
            delegate: self)
    }

    private func writeBody(_ buffer: ByteBuffer, to conn: any UpstreamExchange) {
        let n = buffer.readableBytes
        if keepForReplay { keepCopy(buffer) }
        let promise = worker.eventLoop.makePromise(of: Void.self)
        let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
        // Bytes that never went out (the exchange failed) are the gateway's
        // loss, not the client's: their window comes back either way.
        promise.futureResult.whenComplete { _ in bound.value.bodyTaken(n) }
        conn.sendBody(buffer, promise: promise)
    }

    private func keepCopy(_ buffer: ByteBuffer) {
        let kept = replayBody?.readableBytes ?? 0
        guard kept + buffer.readableBytes <= Self.maxReplayBodyBytes else {
            // Too long to hold: a refused stream is answered, not sent again.
            keepForReplay = false
            replayBody = nil
            replayTrailers = nil
            upstreamHead = nil
            return
        }
        var copy = buffer
        if replayBody == nil { replayBody = sink.allocator.buffer(capacity: buffer.readableBytes) }
        replayBody?.writeBuffer(&copy)
    }

    /// Also when the client has gone: HTTP/2 gives the connection's window
    /// back for a closed stream's bytes (the sink stays this request's while
    /// the pipeline lives), and a connection that keeps other streams needs it.
    private func bodyTaken(_ n: Int) {
        bodyHeld -= n
        bodyTakenTotal &+= n
        sink.requestBodyConsumed(n)
    }

    /// Drops what waits for the upstream and gives its window back.
    private func dropPendingBody() {
        var queued = 0
        for b in pendingBody { queued += b.readableBytes }
        pendingBody.removeAll()
        bodyHeld -= queued
        if queued > 0 { sink.requestBodyConsumed(queued) }
    }

    // MARK: answers

    /// The gateway's own problem+json (only while no response has started;
    /// after that the response can only be cut).
    private func answer(_ rejection: Rejection) {
        switch stage {
        case .forwarding(let conn), .draining(let conn, _): conn.abandon()
        default: break
        }
        stopBodyClock()
        // Whatever was queued for the upstream is discarded: give the window back.
        dropPendingBody()
        bodyBuffer = nil
        bufferedForUpstream = nil
        replayBody = nil
        replayTrailers = nil
        heldResponse = nil
        releaseBufferReservation()
        guard !exchange.responseStarted else { return fail() }
        record.rejection = rejection
        // A gRPC client reads the refusal from trailers (trailers-only answer).
        let answer = ProblemWriter.answer(
            rejection, requestId: request.requestId, requestContentType: request.headers.first(name: "content-type"))
        sendWhole(
            status: answer.status, headers: HTTPHeaders(answer.headers), body: sink.allocator.buffer(string: answer.body))
    }

    /// A local handler's answer.
    private func respond(_ response: LocalResponse) {
        if let reason = response.reason { record.rejection = Rejection(reason, response.detail ?? "") }
        var headers = HTTPHeaders()
        for (n, v) in response.headers where !ASCII.equalsCI(n, "x-request-id") {
            headers.add(name: n, value: v)
        }
        headers.add(name: "x-request-id", value: request.requestId)
        // A known length, so HTTP/1.1 clients get no chunked framing for a few bytes.
        if !headers.contains(name: "content-length") {
            headers.add(name: "content-length", value: String(response.body.readableBytes))
        }
        sendWhole(status: response.status, headers: headers, body: response.body)
    }

    private func sendWhole(status: Int, headers: HTTPHeaders, body: ByteBuffer) {
        exchange.answerWhole(status: status)
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

    /// The response cannot be completed: the stream is reset or the connection
    /// closed (with an HTTP/2 upstream's own reset code, when that is why).
    private func fail(http2ErrorCode: UInt32? = nil) {
        switch stage {
        case .forwarding(let conn), .draining(let conn, _): conn.abandon()
        default: break
        }
        if exchange.cut() { sink.abortResponse(http2ErrorCode: http2ErrorCode) }
        finish()
    }

    private func finish() {
        if isFinished { return }
        // Only a started pipeline counts as open (tests drive some without).
        if case .idle = stage {} else { worker.openRequests.add(-1) }
        stage = .finished
        stopBodyClock()
        releaseBufferReservation()
        // Anything still queued is dropped, and its window given back (a client
        // that reset its stream keeps the connection: it needs the window).
        dropPendingBody()
        bufferedForUpstream = nil
        replayBody = nil
        replayTrailers = nil
        bodyBuffer = nil
        report()
        sink.pipelineFinished()
    }

    /// Counts and logs the request, once. A complete response is reported
    /// before its last bytes are handed to the front end: HTTP/1.1 writes them
    /// at once, so a client holding its answer then also finds it in
    /// `/metrics` and the log, as it does on HTTP/2 (nghttp2 sends later).
    private func report() {
        guard let observer = worker.observer, let summary = record.summary(of: request, exchange: exchange) else { return }
        observer.requestFinished(summary)
    }

    // MARK: UpstreamExchangeDelegate

    var awaitsLease: Bool {
        if case .leasing = stage { return true }
        return false
    }

    func upstreamLeased(_ connection: any UpstreamExchange) {
        guard case .leasing = stage, let head = upstreamHead else {
            connection.releaseUnused()
            return
        }
        stage = .forwarding(connection)
        if bodyClock != nil {
            // The body clock's timer also watches the upstream taking the body:
            // it must first look a quarter of the send timeout from now (it
            // re-arms itself from there; see `bodyTimerFired`).
            let now = worker.eventLoop.now
            upstreamTookBodyAt = now
            bodyTakenSeen = bodyTakenTotal
            if let armed = bodyTimerDeadline, armed > now + upstreamLookInterval {
                bodyTimer?.cancel()
                armBodyTimer(now + upstreamLookInterval)
            }
        }
        // Kept for bodiless requests (they may be replayed on a stale keep-alive
        // connection) and for bodies kept whole for an HTTP/2 replay.
        if !bodyInfo.isEmpty, !keepForReplay { upstreamHead = nil }
        if replays > 0, let body = replayBody { bufferedForUpstream = body }
        var trailers = pendingTrailers
        pendingTrailers = nil
        if trailers == nil, replays > 0 { trailers = replayTrailers }
        if keepForReplay, let trailers { replayTrailers = trailers }
        let endNow = exchange.requestIsComplete && pendingBody.isEmpty && bufferedForUpstream == nil && trailers == nil
        connection.sendHead(head, end: endNow)
        if endNow { return }
        // A stream that could not open fails at once, and the request may
        // already be on its way again on another: nothing more goes here.
        guard case .forwarding(let current) = stage, current === connection else { return }
        if let buffered = bufferedForUpstream {
            bufferedForUpstream = nil
            connection.sendBody(buffered, promise: nil)
        }
        writePendingBody(to: connection)
        // A buffered body is in the socket's hands now.
        releaseBufferReservation()
        if let trailers { connection.sendTrailers(trailers) }
        if exchange.requestIsComplete { connection.sendEnd() }
    }

    func upstreamLeaseFailed(_ error: UpstreamError) {
        guard case .leasing(let route, let attempt) = stage else { return }
        let endpoints = route.resolvedUpstream?.config.endpoints.count ?? 0
        // A failed connect sent nothing: any method may go to the next
        // endpoint (as nginx's proxy_next_upstream does; a gRPC call is a POST).
        if error.isConnectFailure, attempt + 1 < max(2, endpoints) {
            worker.logger.debug("retrying upstream connect", metadata: ["requestId": "\(request.requestId)"])
            return lease(route, attempt: attempt + 1)
        }
        answer(Rejection(error))
    }

    /// `TE: trailers` from the client (gRPC sends it; an HTTP/2 upstream gets it back).
    static func wantsTrailers(_ headers: HTTPHeaders) -> Bool {
        for value in headers[canonicalForm: "te"] where ASCII.equalsCI(String(value), "trailers") { return true }
        return false
    }

    private var isIdempotent: Bool {
        switch request.method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": return true
        default: return false
        }
    }

    /// Passed on before the final head (RFC 9110 §15.2: a proxy forwards
    /// 1xx), at most `maxInterimHeads` of them: an upstream sending thousands
    /// would otherwise have the gateway write thousands to the client.
    func upstreamInterimHead(_ head: UpstreamResponseHead) {
        guard case .forwarding = stage, !exchange.responseStarted, heldResponse == nil,
            interimHeads < Self.maxInterimHeads
        else { return }
        interimHeads += 1
        var head = head
        _ = Self.removeTrustFields(&head, prefix: snapshot.trustPrefixLower)  // never acted on from a 1xx
        sink.sendInterimHead(head)
    }

    static let maxInterimHeads = 8

    func upstreamResponseHead(_ head: UpstreamResponseHead) {
        guard case .forwarding = stage else { return }
        replayBody = nil
        replayTrailers = nil
        keepForReplay = false
        var head = head
        if let setBits = Self.removeTrustFields(&head, prefix: snapshot.trustPrefixLower),
            let queued = queueBitUpdate(setBits), case .forwarding(let conn) = stage
        {
            heldResponse = (head, [], nil, false)
            conn.pauseReads()
            let bound = NIOLoopBound(self, eventLoop: worker.eventLoop)
            queued.whenComplete { _ in bound.value.releaseHeldResponse() }
            return
        }
        exchange.startResponse(status: head.status)
        sink.sendUpstreamResponseHead(head, requestId: request.requestId)
    }

    /// Marks every field whose name has the trust prefix (`_` as `-`) as not forwarded: an
    /// upstream's answer can never speak for the gateway. Returns the value of
    /// `<prefix>Set-Device-Bits` when there is one; several lines are one
    /// value joined with `, ` (RFC 9110 §5.3), so a bit set twice is
    /// malformed rather than the first line winning. Names are lower-cased by
    /// the parser; the head is copied only when such a field exists.
    static func removeTrustFields(_ head: inout UpstreamResponseHead, prefix: [UInt8]) -> ArraySlice<UInt8>? {
        // `_` read as `-`, as trailers are filtered and as CGI-style servers
        // read names: `x_assertgate_user` is the trust prefix too.
        func isTrust(_ f: UpstreamResponseHead.Field) -> Bool {
            f.nameLength >= prefix.count
                && head.bytes[f.nameStart..<f.nameStart + prefix.count].elementsEqual(prefix) {
                    ($0 == UInt8(ascii: "_") ? UInt8(ascii: "-") : $0) == $1
                }
        }
        guard head.fields.contains(where: { $0.forward && isTrust($0) }) else { return nil }
        let setBits = Array("set-device-bits".utf8)
        var value: ArraySlice<UInt8>?
        for i in head.fields.indices where head.fields[i].forward && isTrust(head.fields[i]) {
            let f = head.fields[i]
            head.fields[i].forward = false
            let rest = head.bytes[f.nameStart + prefix.count..<f.nameStart + f.nameLength]
            if rest.elementsEqual(setBits) {
                let line = head.bytes[f.valueStart..<f.valueStart + f.valueLength]
                if let first = value {
                    value = ArraySlice(Array(first) + Array(", ".utf8) + Array(line))
                } else {
                    value = line
                }
            }
        }
        return value
    }

    /// The upstream asked for a bit update: queued for the update worker, or
    /// dropped and counted (no DeviceCheck, no token Apple accepted here, a
    /// malformed value). nil: nothing to wait for.
    private func queueBitUpdate(_ value: ArraySlice<UInt8>) -> EventLoopFuture<Void>? {
        guard let service = worker.deviceCheck else { return nil }
        guard let bits = SetDeviceBits(parsing: value) else {
            service.malformedUpdate()
            return nil
        }
        return service.queue(bits, accepted: device?.acceptedToken)
    }

    /// The update is queued (or could not be): the response goes on.
    private func releaseHeldResponse() {
        guard let held = heldResponse else { return }
        heldResponse = nil
        switch stage {
        case .forwarding(let conn):
            exchange.startResponse(status: held.head.status)
            sink.sendUpstreamResponseHead(held.head, requestId: request.requestId)
            for part in held.parts { sink.sendResponseBody(part) }
            if let trailers = held.trailers { sink.sendResponseTrailers(trailers) }
            if held.ended {
                exchange.endResponse()
                report()
                sink.sendResponseEnd()
                return finish()
            }
            if sink.isCongested, exchange.pause() { return }
            conn.resumeReads()
        case .draining(let conn, _):
            // The client left meanwhile: the drain reads on (or is over).
            if held.ended { return finish() }
            conn.resumeReads()
        default:
            return
        }
    }

    func upstreamResponseBody(_ buffer: ByteBuffer) {
        switch stage {
        case .forwarding(let conn):
            if heldResponse != nil {
                heldResponse?.parts.append(buffer)
                return
            }
            sink.sendResponseBody(buffer)
            if sink.isCongested, exchange.pause() { conn.pauseReads() }
        case .draining(let conn, let discarded):
            // Draining for a client that left: give up on large bodies.
            let total = discarded + buffer.readableBytes
            guard total <= Self.maxDiscardBytes else {
                conn.abandon()
                return finish()
            }
            stage = .draining(conn, discarded: total)
        default:
            return
        }
    }

    func upstreamResponseTrailers(_ fields: HTTPHeaders) {
        guard case .forwarding = stage else { return }
        // Underscores are the upstream's business on the way down; trust names are not.
        let kept = Self.filterTrailers(fields, prefix: snapshot.trustPrefixLower, dropUnderscores: false)
        guard !kept.isEmpty else { return }
        if heldResponse != nil {
            heldResponse?.trailers = kept
            return
        }
        sink.sendResponseTrailers(kept)
    }

    func upstreamResponseEnd() {
        switch stage {
        case .forwarding:
            if heldResponse != nil {
                heldResponse?.ended = true
                return
            }
            exchange.endResponse()
            report()
            sink.sendResponseEnd()
            finish()
        case .draining:
            if heldResponse != nil {
                heldResponse?.ended = true
                return
            }
            finish()
        default:
            return
        }
    }

    func upstreamFailed(_ error: UpstreamError) {
        switch stage {
        case .forwarding(let conn):
            // A pooled connection the upstream had already closed (keep-alive race): a
            // bodiless idempotent request is sent again, once. A stream an HTTP/2 upstream
            // refused unprocessed (GOAWAY): any request whose body is kept whole is sent
            // again, up to `maxRefusedReplays` times. Nothing was answered either way.
            if !exchange.responseStarted, upstreamHead != nil, conn.mayReplay(after: error),
                error == .refusedStream
                    ? (replays < Self.maxRefusedReplays && (bodyInfo.isEmpty || keepForReplay))
                    : (replays == 0 && bodyInfo.isEmpty && isIdempotent),
                let route = leasedRoute
            {
                replays += 1
                worker.logger.debug("replaying on a fresh connection", metadata: ["requestId": "\(request.requestId)"])
                return lease(route, attempt: 1)
            }
            // The connection is closed or closing: `fail`/`answer` abandoning it again is a no-op.
            if exchange.responseStarted {
                fail(http2ErrorCode: error.resetCode)
            } else {
                answer(Rejection(error))
            }
        case .draining:
            finish()
        default:
            return
        }
    }
}

extension Rejection {
    init(_ error: UpstreamError) {
        self.init(error.reason, "upstream: \(error)")
    }
}
