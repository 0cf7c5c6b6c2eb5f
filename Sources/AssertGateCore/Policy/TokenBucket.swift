import NIOConcurrencyHelpers

/// A token bucket: `burst` tokens, refilled at `perSecond`. Time is passed in
/// (monotonic nanoseconds) so tests need no clock.
public struct TokenBucket: Sendable {
    public private(set) var perSecond: Double
    public private(set) var burst: Double
    private var tokens: Double
    private var lastNanos: UInt64

    public init(perSecond: Double, burst: Int, nowNanos: UInt64) {
        self.perSecond = perSecond
        self.burst = Double(max(burst, 1))
        self.tokens = self.burst
        self.lastNanos = nowNanos
    }

    /// Takes one token. When none is left, returns the whole seconds to wait
    /// until one will be (≥ 1, for `Retry-After`).
    public mutating func take(nowNanos: UInt64) -> TakeResult {
        refill(nowNanos: nowNanos)
        if tokens >= 1 {
            tokens -= 1
            return .allowed
        }
        guard perSecond > 0 else { return .limited(retryAfterSeconds: 60) }
        // Capped at 30 days: a rate slower than the config allows must not trap converting.
        let wait = min((1 - tokens) / perSecond, 2_592_000)
        return .limited(retryAfterSeconds: max(1, Int(wait.rounded(.up))))
    }

    /// A new rate from now on: the tokens left are kept, capped at the new
    /// burst (a reload neither refills the bucket nor keeps the old debt
    /// longer than the new rate takes to repay it).
    public mutating func retune(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = Double(max(burst, 1))
        tokens = min(tokens, self.burst)
    }

    /// True when the bucket is full again, so a limiter can forget it.
    public func isFull(nowNanos: UInt64) -> Bool {
        var copy = self
        copy.refill(nowNanos: nowNanos)
        return copy.tokens >= burst
    }

    private mutating func refill(nowNanos: UInt64) {
        guard nowNanos > lastNanos else { return }
        let elapsed = Double(nowNanos - lastNanos) / 1_000_000_000
        tokens = min(burst, tokens + elapsed * perSecond)
        lastNanos = nowNanos
    }

    public enum TakeResult: Sendable, Equatable {
        case allowed
        case limited(retryAfterSeconds: Int)
    }
}

/// Per-peer-address token buckets. The table
/// is bounded: full buckets are dropped in a sweep once it grows past
/// `maxPeers`, and if every bucket is still busy half of them go, so a
/// flood of spoofed addresses cannot grow memory without bound.
public struct PeerRateLimiter: Sendable {
    private var buckets: [String: TokenBucket] = [:]
    private let rate: Double
    private let burst: Int
    private let maxPeers: Int

    public init(perSecond: Double, burst: Int, maxPeers: Int = 65_536) {
        self.rate = perSecond
        self.burst = burst
        self.maxPeers = maxPeers
    }

    public var trackedPeers: Int { buckets.count }

    public mutating func take(peer: String, nowNanos: UInt64) -> TokenBucket.TakeResult {
        if var bucket = buckets[peer] {
            let r = bucket.take(nowNanos: nowNanos)
            buckets[peer] = bucket
            return r
        }
        if buckets.count >= maxPeers { sweep(nowNanos: nowNanos) }
        var bucket = TokenBucket(perSecond: rate, burst: burst, nowNanos: nowNanos)
        let r = bucket.take(nowNanos: nowNanos)
        buckets[peer] = bucket
        return r
    }

    private mutating func sweep(nowNanos: UInt64) {
        buckets = buckets.filter { !$0.value.isFull(nowNanos: nowNanos) }
        if buckets.count >= maxPeers {
            // Still full of active peers: forget half, arbitrarily. They get a
            // fresh bucket, which is the lenient direction.
            let keep = buckets.keys.prefix(maxPeers / 2)
            var kept: [String: TokenBucket] = [:]
            for k in keep { kept[k] = buckets[k] }
            buckets = kept
        }
    }
}

/// One `PeerRateLimiter` for the whole process, so the limit per peer does not
/// grow with the number of workers (a client's connections land on any of
/// them). Challenge issuance is not the hot path; a lock is cheap here.
public final class SharedPeerRateLimiter: Sendable {
    private struct State: Sendable {
        var limiter: PeerRateLimiter
        var rate: RateConfig
        var generation = ConfigGeneration()
    }
    private let state: NIOLockedValueBox<State>

    public init(rate: RateConfig) {
        state = NIOLockedValueBox(
            State(limiter: PeerRateLimiter(perSecond: rate.perSecond, burst: rate.burst), rate: rate))
    }

    /// `rate` is the configuration of this request's snapshot, `generation`
    /// that snapshot's. A newer snapshot with another rate starts every peer
    /// afresh; an older one (a request that began before a reload) uses the
    /// limiter as it is, so requests alternating between two snapshots
    /// cannot refill every bucket.
    public func take(peer: String, rate: RateConfig, generation: UInt64 = 0, nowNanos: UInt64) -> TokenBucket.TakeResult {
        state.withLockedValue { s in
            if s.generation.takes(generation), s.rate != rate {
                s.limiter = PeerRateLimiter(perSecond: rate.perSecond, burst: rate.burst)
                s.rate = rate
            }
            return s.limiter.take(peer: peer, nowNanos: nowNanos)
        }
    }
}
