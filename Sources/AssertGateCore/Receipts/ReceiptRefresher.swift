import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Verifier

/// How one refresh ended; the label of `assertgate_receipt_refreshes_total`.
enum ReceiptRefreshResult: String, CaseIterable, Sendable {
    /// 200 and a receipt that verifies: stored with its risk metric.
    case refreshed
    /// 304: before the receipt's not-before time; tried again then.
    case tooEarly = "too-early"
    /// 404: Apple holds no data for the key any more (30 days); off the schedule.
    case noData = "no-data"
    /// 400: wrong environment or payload; off the schedule.
    case rejected
    /// 401: the DeviceCheck token was refused; every refresh pauses.
    case unauthorized
    /// 429: every refresh pauses.
    case throttled
    /// 5xx, a network or TLS failure: this key is tried again later.
    case failed
    /// 200 with a receipt that does not verify (signature, chain, App ID, key).
    case invalidReceipt = "invalid-receipt"
    /// The key is revoked or gone: off the schedule.
    case dropped
}

/// Refreshes App Attest receipts with Apple (app-attest.md §4) so keys carry
/// Apple's risk metric: every `pollEvery` it claims the keys due on the
/// store's schedule (atomically, so several gateways share the work), POSTs
/// each one's latest receipt with a DeviceCheck token, verifies the answer
/// (PKCS#7 chain to the receipt anchors at its creation time, App ID,
/// attested key) off the event loop, stores it with its risk metric, and puts
/// the key back on the schedule: `refreshEvery` later, never before the new
/// receipt's not-before time.
///
/// Loop-confined: every stored `var` is touched only on `eventLoop`.
final class ReceiptRefresher: @unchecked Sendable {
    struct Settings: Sendable {
        var pollEvery: TimeAmount
        /// Seconds between two refreshes of one key.
        var refreshEvery: Int64
        /// Seconds a claimed key stays off the schedule while being refreshed.
        var lease: Int64 = 300
        /// Keys claimed per poll; a full batch polls again at once.
        var batch = 32
        /// Requests to Apple in flight at once.
        var concurrency = 4
        /// After 401 or 429: seconds every refresh waits.
        var unauthorizedPause: Int64 = 600
        var throttledPause: Int64 = 60
        /// After a failure (5xx, network): seconds until that key is tried again.
        var retryAfterFailure: Int64 = 900
    }

    let eventLoop: EventLoop
    private let store: any Store
    /// Production keys go to `production`, development keys to `development`.
    private let production: AppleHTTPSClient
    private let development: AppleHTTPSClient
    private let token: DeviceCheckToken
    /// The receipt anchors and clock skew of the running configuration: a
    /// reload that removes test anchors must stop receipts signed under them
    /// at once (`follow`).
    private let verification: NIOLockedValueBox<(anchors: TrustAnchors, clockSkew: Int64)>
    private let settings: Settings
    private let threadPool: NIOThreadPool
    private let results: [ReceiptRefreshResult: Counter]
    private let logger: Logger
    private let clock: @Sendable () -> Int64

    private var timer: Scheduled<Void>?
    /// Asks again every `refreshEvery` whether a walk is due, so a fleet that
    /// never restarts still walks once per `refreshEvery`.
    private var walkTimer: RepeatedTask?
    /// A backfill walk is running (one at a time).
    private var walking = false
    private var polling = false
    private var stopped = false
    private var pausedUntil: Int64 = 0
    /// The batch being refreshed, if any.
    private var inFlight: EventLoopFuture<Void>?

    init(
        eventLoop: EventLoop, store: any Store, production: AppleHTTPSClient, development: AppleHTTPSClient,
        token: DeviceCheckToken,
        anchors: TrustAnchors, clockSkew: Int64, settings: Settings, threadPool: NIOThreadPool,
        metrics: GatewayMetrics?, logger: Logger, clock: @escaping @Sendable () -> Int64 = UnixClock.now
    ) {
        self.eventLoop = eventLoop
        self.store = store
        self.production = production
        self.development = development
        self.token = token
        self.verification = NIOLockedValueBox((anchors, clockSkew))
        self.settings = settings
        self.threadPool = threadPool
        var results: [ReceiptRefreshResult: Counter] = [:]
        if let metrics {
            for r in ReceiptRefreshResult.allCases { results[r] = metrics.receiptRefreshes.labels(r.rawValue) }
        }
        self.results = results
        self.logger = logger
        self.clock = clock
    }

    /// Puts keys attested before refresh was enabled on the schedule (spread
    /// over `refreshEvery`, see `backfillIfDue`), then polls now and every
    /// `pollEvery`.
    func start() {
        eventLoop.execute {
            self.poll()
            self.walkIfDue()
            let every = TimeAmount.seconds(max(60, self.settings.refreshEvery))
            self.walkTimer = self.eventLoop.scheduleRepeatedTask(initialDelay: every, delay: every) { _ in
                self.walkIfDue()
            }
        }
    }

    private func walkIfDue() {
        guard !stopped, !walking else { return }
        walking = true
        backfillIfDue().whenComplete { result in
            self.walking = false
            switch result {
            case .success(.walked(let added)) where added > 0:
                self.logger.info("receipt refresh: keys attested earlier put on the schedule", metadata: ["keys": "\(added)"])
            case .success(.walked):
                break
            case .success(.skipped(let at)):
                self.logger.debug(
                    "receipt refresh: the stored keys were walked recently; not walking again",
                    metadata: ["walkedAt": "\(at)"])
            case .failure(let error):
                self.logger.warning("receipt refresh: could not walk the stored keys", metadata: ["reason": "\(error)"])
            }
        }
    }

    enum BackfillOutcome: Equatable {
        /// The walk ran to its end and put this many keys on the schedule.
        case walked(Int)
        /// A gateway on this store completed a walk at this time, less than
        /// `refreshEvery` ago.
        case skipped(walkedAt: Int64)
    }

    /// The walk, unless one completed less than `refreshEvery` ago; a
    /// completed walk is recorded for that long. One that fails half-way is
    /// not recorded, so the next start walks again.
    func backfillIfDue(step: Int = 500) -> EventLoopFuture<BackfillOutcome> {
        let every = max(1, settings.refreshEvery)
        return store.lastBackfillWalk(now: clock()).hop(to: eventLoop).flatMap { last in
            if let last { return self.eventLoop.makeSucceededFuture(.skipped(walkedAt: last)) }
            return self.backfill(step: step).flatMap { added in
                guard !self.stopped else { return self.eventLoop.makeSucceededFuture(.walked(added)) }
                return self.store.recordBackfillWalk(at: self.clock(), validFor: every).hop(to: self.eventLoop)
                    .map { .walked(added) }
            }
        }
    }

    /// Walks every stored key once, a step at a time, scheduling the ones
    /// without a schedule entry; answers how many it added.
    func backfill(step: Int = 500) -> EventLoopFuture<Int> {
        backfillStep(cursor: nil, total: 0, step: step)
    }

    private func backfillStep(cursor: String?, total: Int, step: Int) -> EventLoopFuture<Int> {
        guard !stopped else { return eventLoop.makeSucceededFuture(total) }
        return store.scheduleUnscheduledKeys(
            cursor: cursor, at: clock(), spread: max(1, settings.refreshEvery), count: step
        ).hop(to: eventLoop).flatMap { next, added in
            guard let next else { return self.eventLoop.makeSucceededFuture(total + added) }
            return self.backfillStep(cursor: next, total: total + added, step: step)
        }
    }

    /// No new poll starts and no further key of a batch is begun; completes
    /// when the requests already sent have ended (each bounded by the
    /// client's timeout). Keys left over come back when their lease ends.
    func stop() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.stopped = true
            self.timer?.cancel()
            self.timer = nil
            self.walkTimer?.cancel()
            self.walkTimer = nil
            return (self.inFlight ?? self.eventLoop.makeSucceededVoidFuture()).map {
                self.production.closeIdle()
                self.development.closeIdle()
            }
        }
    }

    // MARK: polling

    private func scheduleNextPoll(after delay: TimeAmount) {
        guard !stopped else { return }
        timer = eventLoop.scheduleTask(in: delay) { self.poll() }
    }

    private func poll() {
        eventLoop.assertInEventLoop()
        guard !stopped, !polling else { return }
        let now = clock()
        if now < pausedUntil {
            scheduleNextPoll(after: .seconds(min(settings.pollEvery.nanoseconds / 1_000_000_000 + 1, pausedUntil - now)))
            return
        }
        polling = true
        let batch = store.claimDueReceiptRefreshes(now: now, lease: settings.lease, limit: settings.batch)
            .hop(to: eventLoop)
            .flatMap { keys -> EventLoopFuture<Int> in
                self.refreshAll(keys[...]).map { keys.count }
            }
        inFlight = batch.map { _ in () }.recover { _ in () }
        batch.whenComplete { result in
            self.polling = false
            self.inFlight = nil
            switch result {
            case .success(let claimed) where claimed >= self.settings.batch:
                self.scheduleNextPoll(after: .zero)
            case .success:
                self.scheduleNextPoll(after: self.settings.pollEvery)
            case .failure(let error):
                self.logger.warning("receipt refresh: cannot read the schedule", metadata: ["reason": "\(error)"])
                self.scheduleNextPoll(after: self.settings.pollEvery)
            }
        }
    }

    /// `concurrency` lanes, each refreshing its share of `keys` one after another.
    private func refreshAll(_ keys: ArraySlice<[UInt8]>) -> EventLoopFuture<Void> {
        let lanes = (0..<max(1, settings.concurrency)).map { lane in
            let mine = keys.enumerated().filter { $0.offset % max(1, settings.concurrency) == lane }.map(\.element)
            return mine.reduce(eventLoop.makeSucceededVoidFuture()) { previous, keyId in
                // After stop() the rest of the batch is left to its lease.
                previous.flatMap { self.stopped ? self.eventLoop.makeSucceededVoidFuture() : self.refreshOne(keyId).map { _ in () } }
            }
        }
        return EventLoopFuture.andAllComplete(lanes, on: eventLoop)
    }

    // MARK: one key

    /// Never fails: every outcome is counted, and the key is put back on the
    /// schedule or taken off it. Nil: not attempted (refreshes are paused
    /// after a 401 or 429 earlier in the batch); the key waits for the pause.
    func refreshOne(_ keyId: [UInt8]) -> EventLoopFuture<ReceiptRefreshResult?> {
        store.receiptRefreshSource(keyId: keyId).hop(to: eventLoop)
            .flatMap { source -> EventLoopFuture<ReceiptRefreshResult?> in
                guard let source, !source.revoked else {
                    return self.store.cancelReceiptRefresh(keyId: keyId).map { .dropped }
                }
                return self.exchange(keyId, source)
            }
            .flatMapError { error in
                // The store failed: the lease brings the key back.
                self.logger.warning("receipt refresh: store unavailable", metadata: ["reason": "\(error)"])
                return self.eventLoop.makeSucceededFuture(ReceiptRefreshResult.failed)
            }
            .map { result in
                if let result { self.results[result]?.inc() }
                return result
            }
    }

    private func exchange(_ keyId: [UInt8], _ source: ReceiptRefreshSource) -> EventLoopFuture<ReceiptRefreshResult?> {
        let now = clock()
        if now < pausedUntil {
            return store.scheduleReceiptRefresh(keyId: keyId, at: pausedUntil).map { nil }
        }
        guard let jwt = token.token(now: now) else {
            return reschedule(keyId, at: now + settings.retryAfterFailure, .failed).map { Optional($0) }
        }
        let body = Array(Base64.encode(source.receipt).utf8)
        let client = source.environment == .production ? production : development
        return client.post(path: "/v1/attestationData", authorization: jwt, body: body, on: eventLoop)
            .hop(to: eventLoop)
            .map { Optional($0) }
            .flatMapError { error in
                self.logger.warning(
                    "receipt refresh: no answer from Apple", metadata: ["host": "\(client.host)", "reason": "\(error)"])
                return self.eventLoop.makeSucceededFuture(nil)
            }
            .flatMap { response -> EventLoopFuture<ReceiptRefreshResult?> in
                guard let response else {
                    return self.reschedule(keyId, at: self.clock() + self.settings.retryAfterFailure, .failed)
                        .map { Optional($0) }
                }
                // A store failure from here on reaches refreshOne's handler.
                return self.handle(response, keyId, source, host: client.host).map { Optional($0) }
            }
    }

    private func handle(
        _ response: AppleHTTPSClient.Response, _ keyId: [UInt8], _ source: ReceiptRefreshSource, host: String
    ) -> EventLoopFuture<ReceiptRefreshResult> {
        let now = clock()
        switch response.status {
        case 200:
            return verifyAndStore(response.body, keyId, source)
        case 304:
            let next = (source.notBefore ?? 0) > now ? (source.notBefore ?? now) : now + max(3600, settings.refreshEvery / 24)
            return reschedule(keyId, at: next, .tooEarly)
        case 400:
            logger.info(
                "receipt refresh: Apple refused the receipt (400: wrong environment for \(host) or bad payload); key taken off the schedule",
                metadata: ["environment": "\(source.environment.rawValue)"])
            return store.cancelReceiptRefresh(keyId: keyId).map { .rejected }
        case 404:
            return store.cancelReceiptRefresh(keyId: keyId).map { .noData }
        case 401:
            if pausedUntil <= now {
                logger.error(
                    "receipt refresh: Apple refused the DeviceCheck token (401); check fraudMetric.teamId, keyId and privateKey",
                    metadata: ["pauseSeconds": "\(settings.unauthorizedPause)"])
            }
            token.invalidate()
            pausedUntil = now + settings.unauthorizedPause
            return reschedule(keyId, at: pausedUntil, .unauthorized)
        case 429:
            pausedUntil = now + settings.throttledPause
            return reschedule(keyId, at: pausedUntil, .throttled)
        default:
            logger.warning("receipt refresh: Apple answered \(response.status)", metadata: ["host": "\(host)"])
            return reschedule(keyId, at: now + settings.retryAfterFailure, .failed)
        }
    }

    /// The clock skew receipts are checked with now (tests).
    var clockSkewInUse: Int64 { verification.withLockedValue { $0.clockSkew } }

    /// A reload's receipt anchors and clock skew, for the receipts checked from now on.
    func follow(anchors: TrustAnchors, clockSkew: Int64) {
        verification.withLockedValue { $0 = (anchors, clockSkew) }
    }

    /// Chain and PKCS#7 checks cost milliseconds: off the event loop.
    private func verifyAndStore(_ body: [UInt8], _ keyId: [UInt8], _ source: ReceiptRefreshSource)
        -> EventLoopFuture<ReceiptRefreshResult>
    {
        let (anchors, skew) = verification.withLockedValue { $0 }
        let verified = threadPool.runIfActive(eventLoop: eventLoop) { () -> Result<(bytes: [UInt8], receipt: Receipt), VerificationError> in
            do throws(VerificationError) {
                let text = body.filter { !($0 == 0x0A || $0 == 0x0D || $0 == 0x20) }
                guard let bytes = try? Base64.decode(text) else {
                    throw .receiptInvalid("answer is not base64")
                }
                let receipt = try ReceiptVerifier.verify(
                    receipt: bytes, appId: source.appId, publicKey: source.publicKey, anchors: anchors, clockSkew: skew)
                guard receipt.kind == .receipt else { throw .receiptInvalid("answer is an \(receipt.kind.rawValue) receipt, not a refreshed one") }
                return .success((bytes, receipt))
            } catch {
                return .failure(error)
            }
        }
        return verified.hop(to: eventLoop).flatMap { result in
            let now = self.clock()
            switch result {
            case .failure(let error):
                self.logger.warning("receipt refresh: Apple's answer does not verify", metadata: ["reason": "\(error.detail)"])
                return self.reschedule(keyId, at: now + self.settings.refreshEvery, .invalidReceipt)
            case .success(let (bytes, receipt)):
                let notBefore = receipt.notBefore?.unixSeconds
                var next = max(now + self.settings.refreshEvery, notBefore ?? 0)
                // Refresh before the receipt expires (with it the metric would be lost).
                if let expiry = receipt.expirationTime?.unixSeconds {
                    next = max(min(next, expiry - Self.expiryMargin), notBefore ?? now, now + 60)
                }
                let due = next
                // The metric's age counts from when Apple made the receipt.
                return self.store.storeReceipt(
                    keyId: keyId, receipt: bytes, riskMetric: receipt.riskMetric, at: receipt.creationTime.unixSeconds,
                    notBefore: notBefore,
                    expiry: receipt.expirationTime?.unixSeconds
                ).flatMap { known in
                    known
                        ? self.reschedule(keyId, at: due, .refreshed)
                        : self.store.cancelReceiptRefresh(keyId: keyId).map { .dropped }
                }
            }
        }
    }

    /// How long before a receipt's expiration its refresh is due at the latest.
    static let expiryMargin: Int64 = 6 * 3600

    private func reschedule(_ keyId: [UInt8], at: Int64, _ result: ReceiptRefreshResult)
        -> EventLoopFuture<ReceiptRefreshResult>
    {
        store.scheduleReceiptRefresh(keyId: keyId, at: at).map { result }
    }
}
