import NIOCore

/// The HTTP/2 abuse budgets read the monotonic clock only when an event is
/// charged (those events are rare in normal traffic).
extension TokenBucket {
    init(perSecond: Double, burst: Int) {
        self.init(perSecond: perSecond, burst: burst, nowNanos: NIODeadline.now().uptimeNanoseconds)
    }

    /// Charges one event; false when the budget is exhausted.
    mutating func take(now: NIODeadline = .now()) -> Bool {
        take(nowNanos: now.uptimeNanoseconds) == .allowed
    }
}
