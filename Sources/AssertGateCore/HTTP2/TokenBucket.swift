import NIOCore

/// A lazily refilled token bucket for abuse accounting (reads the clock only
/// when an event is charged, and those events are rare in normal traffic).
struct TokenBucket {
    private var tokens: Double
    private let burst: Double
    private let perSecond: Double
    private var last: NIODeadline

    init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = Double(max(1, burst))
        self.tokens = Double(max(1, burst))
        self.last = .now()
    }

    /// Charges one event; false when the budget is exhausted.
    mutating func take(now: NIODeadline = .now()) -> Bool {
        let elapsed = Double((now - last).nanoseconds) / 1e9
        last = now
        tokens = min(burst, tokens + elapsed * perSecond)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
