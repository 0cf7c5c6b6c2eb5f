import Logging
import NIOCore
import Verifier

/// Delivers the queued bit updates to Apple (risk.md §3): claims due updates
/// from the store (a lease, so a gateway that dies mid-delivery leaves them
/// due again for any other), calls `update_two_bits`, and acks, retries with
/// backoff (network errors, 5xx, 429, a refused key) or drops them: a token
/// Apple calls invalid, or an update older than `deviceCheck.updateRetryFor`.
/// At least once; loop-confined, one per process.
final class DeviceBitUpdater {
    struct Settings {
        var retryFor: TimeAmount
        /// How often the queue is looked at (`deviceCheck.updatePollEvery`).
        var pollEvery: TimeAmount
        /// The most updates one look claims (`deviceCheck.updateBatch`).
        var batch: Int
        /// A claimed update not acked or rescheduled within this is due again.
        var lease: TimeAmount = .seconds(30)
        /// Backoff after the n-th failed attempt: `firstRetry` × 2^(n-1), at most `maxRetry`.
        var firstRetry: TimeAmount = .milliseconds(500)
        var maxRetry: TimeAmount = .minutes(5)
    }

    private let loop: EventLoop
    private let store: any Store
    private let client: DeviceCheckClient
    private let settings: Settings
    private let metrics: DeviceCheckMetrics?
    private let depth: Gauge?
    private let logger: Logger
    private let complaints: DeviceCheckComplaints
    private let clockMillis: @Sendable () -> Int64
    private var task: RepeatedTask?
    private var running = false
    private var lastDepth = 0
    private var stopped = false
    /// After Apple throttles (429) or refuses the key (401/403) the worker
    /// stops claiming for a while, doubling while it goes on (from
    /// `firstRetry` to `maxRetry`): every other due update would meet the
    /// same answer, and each would add to Apple's count.
    private var pausedUntil: NIODeadline?
    private var refusedInARow = 0

    init(
        loop: EventLoop, store: any Store, client: DeviceCheckClient, settings: Settings, metrics: DeviceCheckMetrics?,
        depth: Gauge?, logger: Logger, complaints: DeviceCheckComplaints,
        clockMillis: @escaping @Sendable () -> Int64 = UnixClock.nowMillis
    ) {
        self.loop = loop
        self.store = store
        self.client = client
        self.settings = settings
        self.metrics = metrics
        self.depth = depth
        self.logger = logger
        self.complaints = complaints
        self.clockMillis = clockMillis
    }

    func start() {
        let bound = NIOLoopBound(self, eventLoop: loop)
        task = loop.scheduleRepeatedTask(initialDelay: settings.pollEvery, delay: settings.pollEvery) { _ in
            bound.value.tick()
        }
    }

    /// On its loop.
    func stop() -> EventLoopFuture<Void> {
        stopped = true
        task?.cancel()
        task = nil
        return loop.makeSucceededVoidFuture()
    }

    /// One pass: skipped while the last is still delivering.
    private func tick() {
        guard !running, !stopped else { return }
        if let pausedUntil, NIODeadline.now() < pausedUntil { return }
        running = true
        let now = clockMillis()
        let bound = NIOLoopBound(self, eventLoop: loop)
        store.claimDeviceBitUpdates(nowMillis: now, leaseMillis: settings.lease.nanoseconds / 1_000_000, limit: settings.batch)
            .hop(to: loop)
            .flatMap { updates -> EventLoopFuture<Void> in
                let me = bound.value
                let deliveries = updates.map { me.deliver($0, now: now) }
                return EventLoopFuture.andAllComplete(deliveries, on: me.loop)
            }
            .flatMap { (_: Void) -> EventLoopFuture<Int> in bound.value.store.deviceBitQueueDepth().hop(to: bound.value.loop) }
            .whenComplete { result in
                let me = bound.value
                me.running = false
                if case .success(let n) = result {
                    // A gauge moves by differences; only this updater sets it.
                    me.depth?.inc(n - me.lastDepth)
                    me.lastDepth = n
                }
            }
    }

    private func deliver(_ update: DeviceBitUpdate, now: Int64) -> EventLoopFuture<Void> {
        if now - update.enqueuedAt > settings.retryFor.nanoseconds / 1_000_000 {
            metrics?.calls("update", "expired").inc()
            logger.warning("a device bit update was dropped after deviceCheck.updateRetryFor", metadata: ["update": "\(update)"])
            return store.ackDeviceBitUpdate(id: update.id).hop(to: loop)
        }
        let bound = NIOLoopBound(self, eventLoop: loop)
        let started = NIODeadline.now()
        return client.update(
            deviceToken: update.deviceToken, bit0: update.bit0, bit1: update.bit1, environment: update.environment,
            on: loop
        ).flatMap { result -> EventLoopFuture<Void> in
            let me = bound.value
            me.metrics?.duration("update").observe(elapsedNanoseconds: (NIODeadline.now() - started).nanoseconds)
            me.metrics?.calls("update", result.metricLabel).inc()
            switch result {
            case .throttled, .unauthorized: me.pause()
            case .failed: break
            default: me.refusedInARow = 0
            }
            switch result {
            case .updated, .valid, .bits, .unset:
                return me.store.ackDeviceBitUpdate(id: update.id).hop(to: me.loop)
            case .invalidToken:
                // Apple will never take this token: retrying cannot help.
                return me.store.ackDeviceBitUpdate(id: update.id).hop(to: me.loop)
            case .badRequest(let why):
                me.complaints.once("updateBadRequest") {
                    me.logger.error(
                        "DeviceCheck refused a bit update as malformed (400); this is a gateway bug; the update is dropped",
                        metadata: ["detail": "\(why)"])
                }
                return me.store.ackDeviceBitUpdate(id: update.id).hop(to: me.loop)
            case .unauthorized(let status, let reason):
                me.complaints.keyRefused(status: status, reason: reason, logger: me.logger)
                return me.retry(update)
            case .throttled, .failed:
                return me.retry(update)
            }
        }
    }

    private func pause() {
        refusedInARow += 1
        let until = NIODeadline.now() + backoff(afterFailures: refusedInARow)
        pausedUntil = max(pausedUntil ?? until, until)
    }

    private func retry(_ update: DeviceBitUpdate) -> EventLoopFuture<Void> {
        let delay = backoff(afterFailures: update.attempts)
        return store.retryDeviceBitUpdate(update, atMillis: clockMillis() + delay.nanoseconds / 1_000_000).hop(to: loop).map { _ in }
    }

    private func backoff(afterFailures n: Int) -> TimeAmount {
        ExponentialBackoff.delay(first: settings.firstRetry, longest: settings.maxRetry, failures: n)
    }
}
