import NIOCore

/// Notices a response (or an HTTP/2 connection) that went quiet: the read
/// path only counts what arrives (no clock per read); the pool's sweep
/// (every 100 ms) turns an unchanged count into quiet time. Shared by
/// HTTP/1.1 connections, HTTP/2 streams and HTTP/2 connections' PINGs.
struct ResponseQuietWatch {
    private var reads = 0
    private var readsAtLastSweep = 0
    /// Since when the sweep has seen no new part (nil: progress, or nothing to wait for).
    private var quietSince: NIODeadline?

    /// A part of the response arrived.
    mutating func progressed() { reads &+= 1 }

    /// The last sweep saw nothing arrive (and was watching).
    var isQuiet: Bool { quietSince != nil }

    mutating func reset() {
        readsAtLastSweep = reads
        quietSince = nil
    }

    /// Sweep: true once nothing has arrived for `timeout` while `watching`
    /// (the response is under way and the gateway is reading it, not paused
    /// for a slow client).
    mutating func quietTooLong(now: NIODeadline, timeout: TimeAmount, watching: Bool) -> Bool {
        guard watching, reads == readsAtLastSweep else {
            reset()
            return false
        }
        guard let since = quietSince else {
            quietSince = now
            return false
        }
        return since + timeout <= now
    }
}
