import Verifier

/// A request the gateway answers itself, whoever refuses it (the gate, the
/// attestation routes, a front end refusing a head, the admin listener): a
/// reason token of protocol.md §5, a detail saying which check failed (never
/// secret material), and the few headers an answer can need. `ProblemWriter`
/// turns it into the one problem+json shape.
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: ReasonToken
    public var detail: String
    /// Seconds for `Retry-After` (rate-limited, gateway-busy).
    public var retryAfter: Int?
    /// The methods for `Allow` (405).
    public var allow: String?
    /// Where a listener's contract gives another status than the token's own
    /// (the admin listener's `404 unknown-key`, `503 upstream-unavailable`).
    public var statusOverride: Int?

    public init(
        _ reason: ReasonToken, _ detail: String = "", retryAfter: Int? = nil, allow: String? = nil,
        status: Int? = nil
    ) {
        self.reason = reason
        self.detail = detail
        self.retryAfter = retryAfter
        self.allow = allow
        self.statusOverride = status
    }

    /// The HTTP status sent (ReasonToken+HTTP.swift is the table).
    public var status: Int { statusOverride ?? reason.httpStatus }

    public var description: String { detail.isEmpty ? reason.rawValue : "\(reason.rawValue): \(detail)" }
}

extension Rejection {
    /// A verification failure: its token, and its description as the detail.
    public init(_ error: VerificationError) {
        self.init(error.reason, error.detail)
    }
}
