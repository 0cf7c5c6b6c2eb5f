import Verifier

/// A request the gateway answers itself: a reason token of protocol.md §5 and
/// a detail for logs (never secret material).
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: ReasonToken
    public var detail: String
    /// Seconds for `Retry-After` (rate-limited answers).
    public var retryAfter: Int?

    public init(_ reason: ReasonToken, _ detail: String = "", retryAfter: Int? = nil) {
        self.reason = reason
        self.detail = detail
        self.retryAfter = retryAfter
    }

    public var description: String { detail.isEmpty ? reason.rawValue : "\(reason.rawValue): \(detail)" }
}
