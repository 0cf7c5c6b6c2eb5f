import NIOConcurrencyHelpers
import NIOCore
import Verifier

/// `Store` in one process: the embedded default and the test double. Same
/// semantics as `RedisStore`; each operation is one critical section under a
/// lock, which is what makes it atomic. Challenge TTLs follow `clock`
/// (monotonic; inject one in tests).
///
/// All `MemoryStore`s made with `store(for:)` share one state; each only
/// differs in the event loop its futures complete on.
public final class MemoryStore: Store, StoreProvider {
    public typealias Clock = @Sendable () -> NIODeadline

    public let eventLoop: EventLoop
    private let state: NIOLockedValueBox<State>
    private let clock: Clock

    public init(eventLoop: EventLoop, clock: @escaping Clock = { .now() }) {
        self.eventLoop = eventLoop
        self.state = NIOLockedValueBox(State())
        self.clock = clock
    }

    private init(sharing other: MemoryStore, eventLoop: EventLoop) {
        self.eventLoop = eventLoop
        self.state = other.state
        self.clock = other.clock
    }

    public func store(for loop: EventLoop) -> any Store {
        loop === eventLoop ? self : MemoryStore(sharing: self, eventLoop: loop)
    }

    public func shutdown() -> EventLoopFuture<Void> {
        eventLoop.makeSucceededVoidFuture()
    }

    // MARK: state

    private struct Entry {
        var publicKey: [UInt8]
        var appId: String
        var environment: AppEnvironment
        var userId: String?
        var createdAt: Int64
        var counter: UInt32
        var revoked: Bool
        var receipt: [UInt8]?
        var riskMetric: Int?
        var riskMetricAt: Int64?
        var receiptNotBefore: Int64?
        var receiptExpiry: Int64?
        var bundleVersion: String?
        var launchCategory: UInt32?
        var keyPolicy: KeyPolicy?
    }

    private struct ChallengeID: Hashable {
        var keyId: [UInt8]
        var challenge: String
    }

    private struct State {
        var keys: [[UInt8]: Entry] = [:]
        var challenges: [ChallengeID: (purpose: ChallengePurpose, expires: NIODeadline)] = [:]
        var users: [String: Set<[UInt8]>] = [:]
        /// Receipt refresh schedule: keyId → unix seconds.
        var refreshAt: [[UInt8]: Int64] = [:]
        /// The last complete backfill walk: when, and until when it counts.
        var walk: (at: Int64, until: Int64)?
        var sweepAt = 1024
        /// The attestation ramp-up bucket and the rate it was made for.
        var ramp: (rate: RateConfig, bucket: TokenBucket)?
        /// H(device token) → when its record expires.
        var deviceTokens: [[UInt8]: NIODeadline] = [:]
        var deviceTokenSweepAt = 1024
        var bitUpdates = MemoryBitUpdateQueue()

        /// Takes the challenge if it is live and has `purpose`; a wrong purpose leaves it.
        mutating func consume(_ id: ChallengeID, purpose: ChallengePurpose, now: NIODeadline) -> Bool {
            guard let c = challenges[id] else { return false }
            if c.expires <= now {
                challenges[id] = nil
                return false
            }
            guard c.purpose == purpose else { return false }
            challenges[id] = nil
            return true
        }

        /// Bounds memory: expired challenges are dropped whenever the table doubles.
        mutating func sweepIfNeeded(now: NIODeadline) {
            guard challenges.count >= sweepAt else { return }
            challenges = challenges.filter { $0.value.expires > now }
            sweepAt = max(1024, challenges.count * 2)
        }

        func userCount(_ uid: String?) -> Int {
            guard let uid, !uid.isEmpty else { return 0 }
            return users[uid]?.count ?? 0
        }

        func record(_ keyId: [UInt8], _ e: Entry) -> KeyRecord {
            KeyRecord(
                keyId: keyId, appId: e.appId, environment: e.environment, counter: e.counter,
                publicKey: e.publicKey, userId: e.userId, createdAt: e.createdAt, revoked: e.revoked,
                riskMetric: e.riskMetric, riskMetricAt: e.riskMetricAt, appVersion: e.bundleVersion,
                launchCategory: e.launchCategory, keyPolicy: e.keyPolicy)
        }

        /// The user's records, sorted by key id, at most `maxUserKeysListed`.
        func userRecords(_ uid: String) -> [KeyRecord]? {
            guard let ids = users[uid], !ids.isEmpty else { return nil }
            let sorted = ids.sorted { Base64.encodeURL($0) < Base64.encodeURL($1) }.prefix(maxUserKeysListed)
            return sorted.compactMap { id in keys[id].map { record(id, $0) } }
        }
    }

    private func answer<T: Sendable>(_ body: (inout State, NIODeadline) throws -> T) -> EventLoopFuture<T> {
        let now = clock()
        do {
            let value = try state.withLockedValue { try body(&$0, now) }
            return eventLoop.makeSucceededFuture(value)
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
    }

    private static func check(_ keyId: [UInt8]) throws {
        guard keyId.count == 32 else { throw StoreError.invalidArgument("keyId must be 32 bytes") }
    }

    // MARK: Store

    public func issueChallenge(keyId: [UInt8], purpose: ChallengePurpose, challenge: String, ttl: TimeAmount)
        -> EventLoopFuture<Void>
    {
        answer { state, now in
            try Self.check(keyId)
            guard ChallengeCodec.isWellFormed(challenge) else {
                throw StoreError.invalidArgument("challenge must be 43 characters of b64url")
            }
            state.sweepIfNeeded(now: now)
            state.challenges[ChallengeID(keyId: keyId, challenge: challenge)] = (purpose, now + ttl)
        }
    }

    public func attestChallengeIsLive(keyId: [UInt8], challenge: String) -> EventLoopFuture<Bool> {
        answer { state, now in
            try Self.check(keyId)
            guard let c = state.challenges[ChallengeID(keyId: keyId, challenge: challenge)] else { return false }
            return c.purpose == .attest && c.expires > now
        }
    }

    public func registerKey(_ key: NewKeyRecord, attestChallenge: String) -> EventLoopFuture<RegisterResult> {
        answer { state, now in
            try Self.check(key.keyId)
            if state.keys[key.keyId] != nil { return .rejected(.keyExists) }
            guard state.consume(ChallengeID(keyId: key.keyId, challenge: attestChallenge), purpose: .attest, now: now)
            else { return .rejected(.unknownChallenge) }
            let uid = (key.userId?.isEmpty ?? true) ? nil : key.userId
            state.keys[key.keyId] = Entry(
                publicKey: key.publicKey, appId: key.appId, environment: key.environment, userId: uid,
                createdAt: key.createdAt, counter: 0, revoked: false, receipt: key.receipt,
                riskMetric: key.riskMetric, riskMetricAt: key.riskMetricAt, receiptNotBefore: key.receiptNotBefore,
                receiptExpiry: key.receiptExpiry, bundleVersion: key.bundleVersion, launchCategory: key.launchCategory,
                keyPolicy: key.keyPolicy)
            if let uid { state.users[uid, default: []].insert(key.keyId) }
            if let at = key.refreshAt { state.refreshAt[key.keyId] = at }
            return .registered(userKeyCount: state.userCount(uid))
        }
    }

    public func loadKey(keyId: [UInt8]) -> EventLoopFuture<StoredKey?> {
        answer { state, _ in
            try Self.check(keyId)
            guard let e = state.keys[keyId] else { return nil }
            return StoredKey(
                publicKey: e.publicKey, appId: e.appId, environment: e.environment,
                bundleVersion: e.bundleVersion, launchCategory: e.launchCategory, keyPolicy: e.keyPolicy)
        }
    }

    public func commitAssertion(keyId: [UInt8], counter: UInt32, challenge: String?) -> EventLoopFuture<CommitResult> {
        answer { state, now in
            try Self.check(keyId)
            guard var e = state.keys[keyId] else { return CommitResult(rejection: .unknownKey, state: nil) }
            let keyState = KeyState(
                revoked: e.revoked, userId: e.userId, userKeyCount: state.userCount(e.userId),
                riskMetric: e.riskMetric, riskMetricAt: e.riskMetricAt)
            if e.revoked { return CommitResult(rejection: .revokedKey, state: keyState) }
            if let challenge,
                !state.consume(ChallengeID(keyId: keyId, challenge: challenge), purpose: .assert, now: now)
            {
                return CommitResult(rejection: .unknownChallenge, state: keyState)
            }
            guard counter > e.counter else { return CommitResult(rejection: .counterReplay, state: keyState) }
            e.counter = counter
            state.keys[keyId] = e
            return CommitResult(rejection: nil, state: keyState)
        }
    }

    public func revokeKey(keyId: [UInt8]) -> EventLoopFuture<KeyRecord?> {
        answer { state, _ in
            try Self.check(keyId)
            guard state.keys[keyId] != nil else { return nil }
            state.keys[keyId]?.revoked = true
            return state.keys[keyId].map { state.record(keyId, $0) }
        }
    }

    public func userKeys(userId: String) -> EventLoopFuture<[KeyRecord]?> {
        answer { state, _ in state.userRecords(userId) }
    }

    public func revokeUser(userId: String) -> EventLoopFuture<[KeyRecord]?> {
        answer { state, _ in
            guard let ids = state.users[userId] else { return nil }
            for id in ids { state.keys[id]?.revoked = true }
            return state.userRecords(userId)
        }
    }

    public func keyRecord(keyId: [UInt8]) -> EventLoopFuture<KeyRecord?> {
        answer { state, _ in
            try Self.check(keyId)
            return state.keys[keyId].map { state.record(keyId, $0) }
        }
    }

    public func storeReceipt(
        keyId: [UInt8], receipt: [UInt8], riskMetric: Int?, at: Int64, notBefore: Int64?, expiry: Int64?
    ) -> EventLoopFuture<Bool> {
        answer { state, _ in
            try Self.check(keyId)
            guard var e = state.keys[keyId] else { return false }
            e.receipt = receipt
            if let riskMetric {
                e.riskMetric = riskMetric
                e.riskMetricAt = at
            }
            e.receiptNotBefore = notBefore
            e.receiptExpiry = expiry
            state.keys[keyId] = e
            return true
        }
    }

    public func scheduleReceiptRefresh(keyId: [UInt8], at: Int64) -> EventLoopFuture<Void> {
        answer { state, _ in
            try Self.check(keyId)
            state.refreshAt[keyId] = at
        }
    }

    public func cancelReceiptRefresh(keyId: [UInt8]) -> EventLoopFuture<Void> {
        answer { state, _ in
            try Self.check(keyId)
            state.refreshAt[keyId] = nil
        }
    }

    public func claimDueReceiptRefreshes(now: Int64, lease: Int64, limit: Int) -> EventLoopFuture<[[UInt8]]> {
        answer { state, _ in
            let due = state.refreshAt.filter { $0.value <= now }
                .sorted { $0.value < $1.value }
                .prefix(max(0, limit)).map(\.key)
            for keyId in due { state.refreshAt[keyId] = now + lease }
            return due
        }
    }

    public func receiptRefreshSource(keyId: [UInt8]) -> EventLoopFuture<ReceiptRefreshSource?> {
        answer { state, _ in
            try Self.check(keyId)
            guard let e = state.keys[keyId], let receipt = e.receipt else { return nil }
            return ReceiptRefreshSource(
                receipt: receipt, publicKey: e.publicKey, appId: e.appId, environment: e.environment,
                revoked: e.revoked, notBefore: e.receiptNotBefore)
        }
    }

    public func scheduleUnscheduledKeys(cursor: String?, at: Int64, spread: Int64, count: Int)
        -> EventLoopFuture<(cursor: String?, added: Int)>
    {
        answer { state, _ in
            // One pass: the whole table is in memory.
            var added = 0
            for keyId in state.keys.keys where state.refreshAt[keyId] == nil {
                state.refreshAt[keyId] = at + (spread > 0 ? Int64.random(in: 0..<spread) : 0)
                added += 1
            }
            return (nil, added)
        }
    }

    public func lastBackfillWalk(now: Int64) -> EventLoopFuture<Int64?> {
        answer { state, _ in
            guard let walk = state.walk, now < walk.until else { return nil }
            return walk.at
        }
    }

    public func recordBackfillWalk(at: Int64, validFor: Int64) -> EventLoopFuture<Void> {
        answer { state, _ in state.walk = (at, at + max(1, validFor)) }
    }

    // MARK: ramp-up, DeviceCheck

    public func takeAttestChallengeBudget(rate: RateConfig) -> EventLoopFuture<TokenBucket.TakeResult> {
        answer { state, now in
            let nanos = now.uptimeNanoseconds
            var bucket = state.ramp?.bucket ?? TokenBucket(perSecond: rate.perSecond, burst: rate.burst, nowNanos: nanos)
            if state.ramp?.rate != rate { bucket.retune(perSecond: rate.perSecond, burst: rate.burst) }
            let result = bucket.take(nowNanos: nanos)
            state.ramp = (rate, bucket)
            return result
        }
    }

    public func claimDeviceToken(hash: [UInt8], ttl: TimeAmount) -> EventLoopFuture<Bool> {
        answer { state, now in
            try DeviceTokenHash.check(hash)
            if let expires = state.deviceTokens[hash], expires > now { return false }
            if state.deviceTokens.count >= state.deviceTokenSweepAt {
                state.deviceTokens = state.deviceTokens.filter { $0.value > now }
                state.deviceTokenSweepAt = max(1024, state.deviceTokens.count * 2)
            }
            state.deviceTokens[hash] = now + ttl
            return true
        }
    }

    public func enqueueDeviceBitUpdate(_ update: DeviceBitUpdate, maxQueued: Int) -> EventLoopFuture<Bool> {
        answer { state, _ in
            try update.validate()
            return state.bitUpdates.enqueue(update, maxQueued: maxQueued)
        }
    }

    public func claimDeviceBitUpdates(nowMillis: Int64, leaseMillis: Int64, limit: Int)
        -> EventLoopFuture<[DeviceBitUpdate]>
    {
        answer { state, _ in state.bitUpdates.claim(now: nowMillis, lease: leaseMillis, limit: limit) }
    }

    public func ackDeviceBitUpdate(id: String) -> EventLoopFuture<Void> {
        answer { state, _ in state.bitUpdates.ack(id: id) }
    }

    public func retryDeviceBitUpdate(_ update: DeviceBitUpdate, atMillis: Int64) -> EventLoopFuture<Bool> {
        answer { state, _ in state.bitUpdates.retry(update, at: atMillis) }
    }

    public func deviceBitQueueDepth() -> EventLoopFuture<Int> {
        answer { state, _ in state.bitUpdates.depth }
    }

    /// The scheduled refresh time of a key (for tests).
    func receiptRefreshTime(keyId: [UInt8]) -> Int64? {
        state.withLockedValue { $0.refreshAt[keyId] }
    }

    public func ping() -> EventLoopFuture<Void> {
        eventLoop.makeSucceededVoidFuture()
    }

    /// Whether a live challenge is held (for tests: "challenge kept").
    func hasChallenge(keyId: [UInt8], challenge: String) -> Bool {
        let now = clock()
        return state.withLockedValue { state in
            guard let c = state.challenges[ChallengeID(keyId: keyId, challenge: challenge)] else { return false }
            return c.expires > now
        }
    }
}
