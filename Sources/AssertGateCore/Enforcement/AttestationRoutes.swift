import NIOCore
import NIOPosix
import Verifier

/// `POST {prefix}/challenge` and `POST {prefix}/attest` (protocol.md §2–§3),
/// served by the gateway itself; any other path under the prefix is
/// `404 no-route`. One instance per worker, loop-confined.
public final class AttestationRoutes: LocalHandler {
    private let eventLoop: EventLoop
    private let store: any Store
    private let threadPool: NIOThreadPool
    private let metrics: GatewayMetrics?
    private let clock: @Sendable () -> Int64
    private let monotonicNanos: () -> UInt64
    private let limiter: SharedPeerRateLimiter

    public let maxBodyBytes = AttestRequest.maxBodyBytes

    public init(
        eventLoop: EventLoop, store: any Store, threadPool: NIOThreadPool, limiter: SharedPeerRateLimiter,
        metrics: GatewayMetrics?, clock: @escaping @Sendable () -> Int64 = UnixClock.now,
        monotonicNanos: @escaping () -> UInt64 = { NIODeadline.now().uptimeNanoseconds }
    ) {
        self.eventLoop = eventLoop
        self.store = store
        self.threadPool = threadPool
        self.limiter = limiter
        self.metrics = metrics
        self.clock = clock
        self.monotonicNanos = monotonicNanos
    }

    public func claims(path: Substring, snapshot: GatewaySnapshot) -> Bool {
        Self.path(path, isUnder: snapshot.attestationPrefix)
    }

    /// `path` is `prefix` or below it (`prefix/…`). Bytes, as routes are
    /// matched (not Characters: no Unicode comparison on every request),
    /// against the prefix the snapshot keeps as bytes: the generic
    /// `starts(with:)` over two UTF8Views cost ~400 instructions a request.
    static func path(_ path: Substring, isUnder prefix: [UInt8]) -> Bool {
        // A native string's bytes in place; any other's copied once (as routes are matched).
        let bytes = path.utf8
        return bytes.withContiguousStorageIfAvailable { isUnder($0, prefix) }
            ?? Array(bytes).withUnsafeBufferPointer { isUnder($0, prefix) }
    }

    private static func isUnder(_ path: UnsafeBufferPointer<UInt8>, _ prefix: [UInt8]) -> Bool {
        guard path.count >= prefix.count else { return false }
        let same = prefix.withUnsafeBufferPointer { p -> Bool in
            guard let a = path.baseAddress, let b = p.baseAddress else { return p.isEmpty }
            return memcmp(a, b, p.count) == 0
        }
        return same && (path.count == prefix.count || path[prefix.count] == UInt8(ascii: "/"))
    }

    public func handle(_ request: ProxyRequest, body: ByteBuffer) -> EventLoopFuture<LocalResponse> {
        guard let context = request.snapshot.enforcement else {
            return eventLoop.makeSucceededFuture(problem(Rejection(.storeUnavailable, "no verifier"), request))
        }
        let route = request.path.dropFirst(context.prefix.count)
        let answer: EventLoopFuture<LocalResponse>
        switch route {
        case "/challenge", "/attest":
            guard request.method == "POST" else {
                answer = eventLoop.makeSucceededFuture(
                    problem(Rejection(.methodNotAllowed, allow: "POST"), request))
                break
            }
            let bytes = Array(body.readableBytesView)
            answer = route == "/challenge" ? challenge(request, bytes, context) : attest(request, bytes, context)
        default:
            answer = eventLoop.makeSucceededFuture(problem(Rejection(.noRoute), request))
        }
        return answer
    }

    // MARK: challenge

    private func challenge(_ request: ProxyRequest, _ body: [UInt8], _ context: EnforcementContext)
        -> EventLoopFuture<LocalResponse>
    {
        let peer = request.clientAddress ?? ""
        if case .limited(let retry) = limiter.take(
            peer: peer, rate: context.challengeRate, generation: request.snapshot.generation, nowNanos: monotonicNanos())
        {
            return eventLoop.makeSucceededFuture(
                problem(Rejection(.rateLimited, retryAfter: retry), request))
        }
        let parsed: ChallengeRequest
        do throws(Rejection) {
            parsed = try ChallengeRequest.parse(body)
        } catch {
            return eventLoop.makeSucceededFuture(problem(error, request))
        }
        guard parsed.purpose == .attest, let rampUp = context.rampUp else {
            return issue(parsed, request, context)
        }
        // risk.md §4: the shared budget first; a refused challenge stores nothing.
        let metrics = self.metrics
        let budget = store.takeAttestChallengeBudget(rate: rampUp).map { budget -> Rejection? in
            guard case .limited(let retry) = budget else { return nil }
            metrics?.attestChallengesRampLimited.inc()
            return Rejection(.rateLimited, retryAfter: retry)
        }
        return afterStoreCheck(budget, request) { self.issue(parsed, request, context) }
    }

    /// A store step that may refuse the request (a `Rejection`) before `next`
    /// runs; a store that cannot answer is `503 store-unavailable`.
    private func afterStoreCheck(
        _ check: EventLoopFuture<Rejection?>, _ request: ProxyRequest,
        next: @escaping () -> EventLoopFuture<LocalResponse>
    ) -> EventLoopFuture<LocalResponse> {
        check
            .hop(to: eventLoop)
            .assumeIsolated()
            .flatMap { refusal -> EventLoopFuture<LocalResponse> in
                if let refusal { return self.eventLoop.makeSucceededFuture(self.problem(refusal, request)) }
                return next()
            }
            .flatMapErrorThrowing { _ in
                self.metrics?.storeErrors.inc()
                return self.problem(Rejection(.storeUnavailable), request)
            }
            .nonisolated()
    }

    private func issue(_ parsed: ChallengeRequest, _ request: ProxyRequest, _ context: EnforcementContext)
        -> EventLoopFuture<LocalResponse>
    {
        let challenge = StoreChallenge.generate()
        let ttl = context.challengeTTL
        return store.issueChallenge(keyId: parsed.keyId, purpose: parsed.purpose, challenge: challenge, ttl: ttl)
            .hop(to: eventLoop)
            .assumeIsolated()
            .map { _ in
                if parsed.purpose == .attest { self.metrics?.attestChallengesIssued.inc() }
                let seconds = ttl.nanoseconds / 1_000_000_000
                let json = JSONText.object([("challenge", JSONText.quoted(challenge)), ("expiresIn", "\(seconds)")])
                return self.json(200, json, extraHeaders: [("Cache-Control", "no-store")])
            }
            .recover { _ in
                self.metrics?.storeErrors.inc()
                return self.problem(Rejection(.storeUnavailable), request)
            }
            .nonisolated()
    }

    // MARK: attest

    private func attest(_ request: ProxyRequest, _ body: [UInt8], _ context: EnforcementContext)
        -> EventLoopFuture<LocalResponse>
    {
        let parsed: AttestRequest
        do throws(Rejection) {
            parsed = try AttestRequest.parse(body)
        } catch {
            return eventLoop.makeSucceededFuture(problem(error, request))
        }
        // A request without a live challenge costs one lookup, not certificate
        // chains and signatures on the thread pool (which every attestation
        // shares): the challenge route is rate-limited per client, this one
        // would otherwise not be. `registerKey` still consumes it atomically.
        let live = store.attestChallengeIsLive(keyId: parsed.keyId, challenge: parsed.challenge)
            .map { $0 ? nil : Rejection(.unknownChallenge) }
        return afterStoreCheck(live, request) { self.verifyAndRegister(parsed, request, context) }
    }

    /// The checks of app-attest.md §2 on the thread pool, then the one atomic
    /// store step that consumes the challenge and stores the key.
    private func verifyAndRegister(_ parsed: AttestRequest, _ request: ProxyRequest, _ context: EnforcementContext)
        -> EventLoopFuture<LocalResponse>
    {
        let clientDataHash = SHA256.hash(ClientData.attest(challenge: parsed.challenge, userId: parsed.userId))
        let now = clock()
        // Chain and PKCS#7 checks cost milliseconds: keep them off the event loop.
        let verified = threadPool.runIfActive(eventLoop: eventLoop) { () -> Result<VerifiedAttestation, VerificationError> in
            do throws(VerificationError) {
                return .success(
                    try context.verifier.verify(
                        attestationObject: parsed.attestation, keyId: parsed.keyId, clientDataHash: clientDataHash,
                        allowedApps: context.allowedApps, at: now))
            } catch {
                return .failure(error)
            }
        }
        return verified.assumeIsolated().flatMap { result -> EventLoopFuture<LocalResponse> in
            let attestation: VerifiedAttestation
            switch result {
            case .failure(let error):
                return self.eventLoop.makeSucceededFuture(
                    self.problem(Rejection(error), request))
            case .success(let v):
                attestation = v
            }
            var record = NewKeyRecord(
                keyId: attestation.keyId, publicKey: attestation.publicKey, appId: attestation.appId,
                environment: attestation.environment == .production ? .production : .development,
                userId: parsed.userId, createdAt: now, receipt: attestation.receiptBytes,
                riskMetric: attestation.receipt.riskMetric,
                riskMetricAt: attestation.receipt.riskMetric == nil ? nil : attestation.receipt.creationTime.unixSeconds,
                receiptNotBefore: attestation.receipt.notBefore?.unixSeconds,
                receiptExpiry: attestation.receipt.expirationTime?.unixSeconds,
                bundleVersion: attestation.extensions.bundleVersion,
                launchCategory: attestation.extensions.launchCategory, keyPolicy: attestation.keyPolicy)
            for key in attestation.extensions.malformedKeys { self.metrics?.malformedExtension(key).inc() }
            if context.refreshesReceipts {
                // First refresh as soon as Apple allows it: the attestation's
                // receipt carries no risk metric.
                record.refreshAt = max(now, record.receiptNotBefore ?? now)
            }
            return self.store.registerKey(record, attestChallenge: parsed.challenge)
                .hop(to: self.eventLoop)
                .assumeIsolated()
                .map { outcome in
                    switch outcome {
                    case .rejected(let reason):
                        return self.problem(Rejection(reason), request)
                    case .registered:
                        let json = JSONText.object([
                            ("keyId", JSONText.quoted(Base64.encodeURL(attestation.keyId))),
                            ("environment", JSONText.quoted(attestation.environment.rawValue)),
                            ("trust", JSONText.quoted("attested")),
                            ("appId", JSONText.quoted(attestation.appId)),
                        ])
                        return self.json(201, json, extraHeaders: [("Cache-Control", "no-store")])
                    }
                }
                .recover { _ in
                    self.metrics?.storeErrors.inc()
                    return self.problem(Rejection(.storeUnavailable), request)
                }
                .nonisolated()
        }.recover { _ in
            // Thread pool shut down: the gateway is stopping.
            self.problem(Rejection(.storeUnavailable, "shutting down"), request)
        }.nonisolated()
    }

    // MARK: answers

    private func json(_ status: Int, _ text: String, extraHeaders: [(String, String)] = []) -> LocalResponse {
        var buffer = ByteBufferAllocator().buffer(capacity: text.utf8.count + 1)
        buffer.writeString(text)
        buffer.writeString("\n")
        return LocalResponse(
            status: status, headers: [("Content-Type", "application/json")] + extraHeaders, body: buffer)
    }

    private func problem(_ rejection: Rejection, _ request: ProxyRequest) -> LocalResponse {
        let answer = ProblemWriter.answer(rejection, requestId: request.requestId)
        return LocalResponse(
            status: answer.status, headers: answer.headers, body: ByteBuffer(string: answer.body),
            reason: rejection.reason, detail: rejection.detail.isEmpty ? nil : rejection.detail)
    }
}
