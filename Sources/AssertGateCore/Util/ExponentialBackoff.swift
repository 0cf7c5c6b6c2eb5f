import NIOCore

/// A wait that doubles with each failure in a row, from `first` up to `longest`.
enum ExponentialBackoff {
    /// The wait after the `failures`-th failure in a row (the first waits `first`).
    static func delay(first: TimeAmount, longest: TimeAmount, failures: Int) -> TimeAmount {
        // Past 2^20 times `first` every realistic `longest` has been reached
        // (and the shift stays far from overflowing).
        let doubled = first.nanoseconds << max(0, min(failures - 1, 20))
        return .nanoseconds(min(longest.nanoseconds, doubled))
    }
}
