import NIOCore
import Verifier

/// The anti-replay state of App Attest: one-time challenges, key records and
/// assertion counters. Every operation that decides something is atomic (one
/// Lua script in Redis, one critical section in memory), so two gateways can
/// never both accept the same counter or spend the same challenge.
///
/// A `Store` value is bound to one event loop: its futures complete on
/// `eventLoop`. The gateway asks a `StoreProvider` for the store of the loop
/// it runs on, so the hot path never hops threads.
///
/// Time: the store reads no wall clock. The caller passes unix seconds for
/// `createdAt` and receipt times, and computes risk-metric ages from the
/// returned `riskMetricAt`. Challenge TTLs are kept by Redis (`SET … PX`) or,
/// in `MemoryStore`, by its injectable monotonic clock.
///
/// Key ids are the 32 raw bytes; challenges are the 43-character unpadded
/// b64url strings as issued (anything else can never match and answers
/// `unknown-challenge`). Failures to get an answer are `StoreError`s, or,
/// from `RedisStore`, the client's `RedisError`s as the client reported them.
public protocol Store: AnyObject, Sendable {
    var eventLoop: EventLoop { get }

    /// Stores `challenge` for `keyId` and `purpose`, expiring after `ttl`.
    func issueChallenge(keyId: [UInt8], purpose: ChallengePurpose, challenge: String, ttl: TimeAmount)
        -> EventLoopFuture<Void>

    /// Whether an `attest` challenge for `keyId` is live (nothing consumed):
    /// the attest route asks before it verifies, so a request without one
    /// costs a lookup, not certificate chains and signatures. `registerKey`
    /// still consumes it atomically.
    func attestChallengeIsLive(keyId: [UInt8], challenge: String) -> EventLoopFuture<Bool>

    /// One atomic step: `key-exists` if the keyId is stored (challenge kept);
    /// else the `attest` challenge for this key is consumed (`unknown-challenge`
    /// if absent), the record is stored with counter 0, the keyId joins its
    /// user's set and, with `refreshAt`, the refresh schedule. Answers the
    /// user's key count.
    func registerKey(_ key: NewKeyRecord, attestChallenge: String) -> EventLoopFuture<RegisterResult>

    /// The immutable part of a key (cacheable per worker), or nil if unknown.
    func loadKey(keyId: [UInt8]) -> EventLoopFuture<StoredKey?>

    /// One atomic step, in this order: `unknown-key`; `revoked-key` (challenge
    /// kept); if a challenge is given it must exist for this key with purpose
    /// `assert` (`unknown-challenge`, not consumed) and is then consumed whatever
    /// follows; `counter` must be greater than the stored counter and replaces
    /// it (`counter-replay`). The result carries the key's mutable state.
    func commitAssertion(keyId: [UInt8], counter: UInt32, challenge: String?) -> EventLoopFuture<CommitResult>

    /// `commitAssertion` for the hot path: the outcome goes to `completion`,
    /// called on `eventLoop`, with no future in between.
    func commitAssertion(
        keyId: [UInt8], counter: UInt32, challenge: String?,
        completion: @escaping @Sendable (Result<CommitResult, any Error>) -> Void)

    /// Marks the key revoked; the updated record, or nil if unknown.
    func revokeKey(keyId: [UInt8]) -> EventLoopFuture<KeyRecord?>

    /// The admin view of a key, or nil if unknown.
    func keyRecord(keyId: [UInt8]) -> EventLoopFuture<KeyRecord?>

    /// Stores the latest receipt and, when given, its risk metric with the time
    /// it was obtained (unix seconds), and the receipt's not-before and
    /// expiration times. False if the key is unknown.
    func storeReceipt(
        keyId: [UInt8], receipt: [UInt8], riskMetric: Int?, at: Int64, notBefore: Int64?, expiry: Int64?
    ) -> EventLoopFuture<Bool>

    // Receipt refresh (app-attest.md §4): a schedule of keyIds by next refresh
    // time, shared by every gateway on the store.

    /// Puts the key on the schedule at `at` (unix seconds), replacing its time.
    func scheduleReceiptRefresh(keyId: [UInt8], at: Int64) -> EventLoopFuture<Void>

    /// Takes the key off the schedule.
    func cancelReceiptRefresh(keyId: [UInt8]) -> EventLoopFuture<Void>

    /// Keys due at `now`, each moved to `now + lease` in the same atomic step:
    /// two gateways never take the same key, and one that dies mid-refresh
    /// only delays it by `lease`. At most `limit` (`RedisStore` rounds it up
    /// to a multiple of its schedule's parts), earliest first within a part.
    func claimDueReceiptRefreshes(now: Int64, lease: Int64, limit: Int) -> EventLoopFuture<[[UInt8]]>

    /// What refreshing the key needs, or nil if the key is unknown.
    func receiptRefreshSource(keyId: [UInt8]) -> EventLoopFuture<ReceiptRefreshSource?>

    /// One step of a walk over all stored keys that puts every key without a
    /// schedule entry on the schedule, at `at` plus a random part of `spread`
    /// seconds (keys already scheduled keep their time). For keys attested
    /// before receipt refresh was enabled; one without a receipt is dropped
    /// when it comes due. `cursor` nil starts the walk; the
    /// answer's cursor is nil when it is complete.
    func scheduleUnscheduledKeys(cursor: String?, at: Int64, spread: Int64, count: Int)
        -> EventLoopFuture<(cursor: String?, added: Int)>

    /// When the last complete walk of `scheduleUnscheduledKeys` was recorded
    /// (unix seconds), if `now` is within the `validFor` it was recorded
    /// with; nil otherwise. Shared by every gateway on the store, so a
    /// rolling restart of a fleet walks the keys once, not once per gateway.
    func lastBackfillWalk(now: Int64) -> EventLoopFuture<Int64?>

    /// Records a complete walk at `at`, remembered for `validFor` seconds.
    func recordBackfillWalk(at: Int64, validFor: Int64) -> EventLoopFuture<Void>

    /// Succeeds when the store can answer (for `/readyz`).
    func ping() -> EventLoopFuture<Void>

    /// The records of every key attested with `userId` (risk.md §2, admin),
    /// sorted by key id; nil when no key was ever attested with it. At most
    /// `maxUserKeysListed` records.
    func userKeys(userId: String) -> EventLoopFuture<[KeyRecord]?>

    /// Revokes every key of `userId`; their records after revocation, or nil
    /// for an unknown user. Each key is revoked atomically on its own slot.
    func revokeUser(userId: String) -> EventLoopFuture<[KeyRecord]?>

    // Attestation ramp-up (risk.md §4): one budget of `attest` challenges
    // shared by every gateway on the store.

    /// Takes one challenge from the budget `rate` describes (a token bucket
    /// of `rate.burst` refilled at `rate.perSecond`), in one atomic step on
    /// the store's own clock (Redis `TIME`), so gateways with skewed clocks
    /// share one budget. `.limited` carries the whole seconds (≥ 1) until
    /// the bucket allows one more. A changed `rate` applies from the next take.
    func takeAttestChallengeBudget(rate: RateConfig) -> EventLoopFuture<TokenBucket.TakeResult>

    // DeviceCheck (risk.md §3).

    /// Records `hash` (H(device token), 32 bytes) for `ttl`: true when it was
    /// not recorded yet (the token's first use), false for a replay. Only the
    /// hash is stored.
    func claimDeviceToken(hash: [UInt8], ttl: TimeAmount) -> EventLoopFuture<Bool>

    /// Queues `update`, due at once, unless the queue already holds
    /// `maxQueued` updates: then false, and nothing is stored. Enqueuing an
    /// id already queued changes nothing (a retried write does not duplicate
    /// the update) and answers true.
    func enqueueDeviceBitUpdate(_ update: DeviceBitUpdate, maxQueued: Int) -> EventLoopFuture<Bool>

    /// Updates due at `nowMillis` (unix ms), earliest first, at most `limit`,
    /// each leased to the caller until `nowMillis + leaseMillis` and its
    /// `attempts` raised by one, in one atomic step: two gateways never claim
    /// the same update within a lease, and an update whose claimer dies is
    /// due again when the lease ends.
    func claimDeviceBitUpdates(nowMillis: Int64, leaseMillis: Int64, limit: Int) -> EventLoopFuture<[DeviceBitUpdate]>

    /// Removes the update for good (delivered, or dropped); unknown ids are ignored.
    func ackDeviceBitUpdate(id: String) -> EventLoopFuture<Void>

    /// Makes a claimed update due again at `atMillis` (backoff). Only the
    /// latest claim may: false (nothing changed) when the update is gone or
    /// was claimed again since `update` was (its lease had ended).
    func retryDeviceBitUpdate(_ update: DeviceBitUpdate, atMillis: Int64) -> EventLoopFuture<Bool>

    /// Updates in the queue: due, leased or waiting for a retry (for a metric).
    func deviceBitQueueDepth() -> EventLoopFuture<Int>
}

/// The most keys a user listing or bulk revoke touches (an account with more
/// is not a phone in someone's hand; the rest are left to `/keys/{keyId}`).
public let maxUserKeysListed = 1000

extension Store {
    public func storeReceipt(keyId: [UInt8], receipt: [UInt8], riskMetric: Int?, at: Int64) -> EventLoopFuture<Bool> {
        storeReceipt(keyId: keyId, receipt: receipt, riskMetric: riskMetric, at: at, notBefore: nil, expiry: nil)
    }

    public func commitAssertion(
        keyId: [UInt8], counter: UInt32, challenge: String?,
        completion: @escaping @Sendable (Result<CommitResult, any Error>) -> Void
    ) {
        commitAssertion(keyId: keyId, counter: counter, challenge: challenge).hop(to: eventLoop)
            .whenComplete(completion)
    }
}

/// Hands out the store bound to an event loop (one per gateway worker).
public protocol StoreProvider: Sendable {
    /// The store for `loop`; a loop the provider does not own gets a store on
    /// another loop (its futures then complete there: hop back if needed).
    func store(for loop: EventLoop) -> any Store
    /// Releases connections; stores must not be used afterwards.
    func shutdown() -> EventLoopFuture<Void>
}

public enum ChallengePurpose: String, Sendable, Hashable, CaseIterable {
    case attest
    case assert
}

/// Everything stored when a key is attested.
public struct NewKeyRecord: Sendable, Equatable {
    public var keyId: [UInt8]
    /// The 65-byte uncompressed X9.62 point.
    public var publicKey: [UInt8]
    public var appId: String
    public var environment: AppEnvironment
    /// nil or empty = attested without a user id.
    public var userId: String?
    /// Unix seconds.
    public var createdAt: Int64
    /// The attestation receipt (DER PKCS#7), kept to refresh the risk metric.
    public var receipt: [UInt8]?
    public var riskMetric: Int?
    public var riskMetricAt: Int64?
    /// Receipt validity (unix seconds): when it may be refreshed, when it expires.
    public var receiptNotBefore: Int64?
    public var receiptExpiry: Int64?
    /// `apple_bundle_version_01` text, if the attestation carried it.
    public var bundleVersion: String?
    /// `apple_validation_category_01` as a number, if the attestation carried a well-formed one.
    public var launchCategory: UInt32?
    /// The credential certificate's key access policy, if it had one.
    public var keyPolicy: KeyPolicy?
    /// When set, the key joins the receipt-refresh schedule at this time
    /// (unix seconds) in the same atomic step that stores it.
    public var refreshAt: Int64?

    public init(
        keyId: [UInt8], publicKey: [UInt8], appId: String, environment: AppEnvironment,
        userId: String? = nil, createdAt: Int64, receipt: [UInt8]? = nil, riskMetric: Int? = nil,
        riskMetricAt: Int64? = nil, receiptNotBefore: Int64? = nil, receiptExpiry: Int64? = nil,
        bundleVersion: String? = nil, launchCategory: UInt32? = nil, keyPolicy: KeyPolicy? = nil
    ) {
        self.keyPolicy = keyPolicy
        self.keyId = keyId
        self.publicKey = publicKey
        self.appId = appId
        self.environment = environment
        self.userId = userId
        self.createdAt = createdAt
        self.receipt = receipt
        self.riskMetric = riskMetric
        self.riskMetricAt = riskMetricAt
        self.receiptNotBefore = receiptNotBefore
        self.receiptExpiry = receiptExpiry
        self.bundleVersion = bundleVersion
        self.launchCategory = launchCategory
    }
}

public enum RegisterResult: Sendable, Equatable {
    /// Stored; the number of keys of its user id (0 without a user id).
    case registered(userKeyCount: Int)
    /// `key-exists` or `unknown-challenge`.
    case rejected(ReasonToken)
}

/// The immutable part of a key: what verifying a signature needs.
public struct StoredKey: Sendable, Equatable {
    public var publicKey: [UInt8]
    public var appId: String
    public var environment: AppEnvironment
    public var bundleVersion: String?
    public var launchCategory: UInt32?
    public var keyPolicy: KeyPolicy?

    public init(
        publicKey: [UInt8], appId: String, environment: AppEnvironment, bundleVersion: String? = nil,
        launchCategory: UInt32? = nil, keyPolicy: KeyPolicy? = nil
    ) {
        self.keyPolicy = keyPolicy
        self.publicKey = publicKey
        self.appId = appId
        self.environment = environment
        self.bundleVersion = bundleVersion
        self.launchCategory = launchCategory
    }
}

/// A key's latest receipt and what checking a refreshed one needs.
public struct ReceiptRefreshSource: Sendable, Equatable {
    public var receipt: [UInt8]
    public var publicKey: [UInt8]
    public var appId: String
    public var environment: AppEnvironment
    public var revoked: Bool
    /// Unix seconds before which Apple answers 304.
    public var notBefore: Int64?

    public init(
        receipt: [UInt8], publicKey: [UInt8], appId: String, environment: AppEnvironment, revoked: Bool, notBefore: Int64?
    ) {
        self.receipt = receipt
        self.publicKey = publicKey
        self.appId = appId
        self.environment = environment
        self.revoked = revoked
        self.notBefore = notBefore
    }
}

/// The mutable part of a key, returned with every commit.
public struct KeyState: Sendable, Equatable {
    public var revoked: Bool
    public var userId: String?
    /// Keys attested for `userId`, revoked ones included; 0 without a user id.
    public var userKeyCount: Int
    public var riskMetric: Int?
    /// Unix seconds when `riskMetric` was obtained.
    public var riskMetricAt: Int64?

    public init(revoked: Bool, userId: String?, userKeyCount: Int, riskMetric: Int?, riskMetricAt: Int64?) {
        self.revoked = revoked
        self.userId = userId
        self.userKeyCount = userKeyCount
        self.riskMetric = riskMetric
        self.riskMetricAt = riskMetricAt
    }
}

public struct CommitResult: Sendable, Equatable {
    /// nil = accepted; else `unknown-key`, `revoked-key`, `unknown-challenge` or `counter-replay`.
    public var rejection: ReasonToken?
    /// The key's state; nil only for `unknown-key`.
    public var state: KeyState?

    public var isAccepted: Bool { rejection == nil }

    public init(rejection: ReasonToken?, state: KeyState?) {
        self.rejection = rejection
        self.state = state
    }
}
