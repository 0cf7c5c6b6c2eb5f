import NIOCore

/// Whether an endpoint pool has left a request waiting with nothing free
/// (HTTP/1.1: every connection busy; HTTP/2: every stream slot taken) and
/// could open no more connections, for longer than the upstream's response
/// timeout, until something frees. Both kinds of pool keep one; the sweep
/// reports a flip to `/readyz` (`UpstreamPool.exhaustionChanged`).
struct PoolExhaustion {
    private var since: NIODeadline?
    /// What `/readyz` was last told.
    private(set) var reported = false
    private let endpoint: UpstreamEndpoint
    private let pool: ObjectIdentifier

    init(endpoint: UpstreamEndpoint, pool: UpstreamPool) {
        self.endpoint = endpoint
        self.pool = ObjectIdentifier(pool)
    }

    /// Distinguishes the pool in `UpstreamHealth` (one per worker and
    /// endpoint); made only when a flip is reported, not with every pool.
    var key: String { "\(endpoint) worker \(pool.hashValue)" }

    /// A request found nothing free and the pool may open no more connections.
    mutating func requestWaited(now: NIODeadline) {
        if since == nil { since = now }
    }

    /// The sweep's look: `free` when the pool could serve a request now.
    /// The new state when it changed, else nil.
    mutating func check(free: Bool, now: NIODeadline, timeout: TimeAmount) -> Bool? {
        if free { since = nil }
        let exhausted = since.map { $0 + timeout <= now } ?? false
        guard exhausted != reported else { return nil }
        reported = exhausted
        return exhausted
    }
}
