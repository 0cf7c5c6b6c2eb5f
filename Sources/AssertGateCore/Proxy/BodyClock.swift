import NIOCore

/// When a request body that is still arriving has taken too long: no byte
/// for `timeout`, or (after `timeout`) an average below `minRate` bytes per
/// second since the clock started. One deadline, recomputed when the timer
/// fires, so a body costs one scheduled task, not one per chunk.
struct BodyClock {
    private var startedAt: NIODeadline
    private var receivedAtStart: Int
    private var lastByteAt: NIODeadline
    let timeout: TimeAmount
    let minRate: Int

    init(now: NIODeadline, timeout: TimeAmount, minRate: Int, received: Int) {
        self.startedAt = now
        self.receivedAtStart = received
        self.lastByteAt = now
        self.timeout = timeout
        self.minRate = minRate
    }

    mutating func received(at now: NIODeadline) { lastByteAt = now }

    /// The clock starts over (the gateway held the body back until now).
    mutating func restart(now: NIODeadline, received: Int) {
        startedAt = now
        receivedAtStart = received
        lastByteAt = now
    }

    /// The earlier of: the last byte + `timeout`; the moment the average rate
    /// falls below `minRate` (never before `timeout` has passed).
    func deadline(received: Int) -> NIODeadline {
        let quiet = lastByteAt + timeout
        guard minRate > 0 else { return quiet }
        let bytes = Int64(max(0, received - receivedAtStart))
        // bytes / elapsed >= minRate  ⇔  elapsed <= bytes / minRate
        let (scaled, overflow) = bytes.multipliedReportingOverflow(by: 1_000_000_000)
        let allowed = overflow ? TimeAmount.hours(24) : TimeAmount.nanoseconds(scaled / Int64(minRate))
        let slow = startedAt + max(timeout, allowed)
        return min(quiet, slow)
    }
}
