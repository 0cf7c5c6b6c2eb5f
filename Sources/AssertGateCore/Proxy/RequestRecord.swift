import NIOCore
import Verifier

/// What is reported of one request when the pipeline is done with it
/// (metrics, the access log): gathered along the way, reported once.
struct RequestRecord {
    let startedAt: NIODeadline?
    /// The matched route's upstream; nil for local routes and no-route.
    var upstream: String?
    /// What the gate concluded, when the request was forwarded.
    var outcome: TrustOutcome?
    /// Why the gateway answered itself, when it did.
    var rejection: Rejection?
    private var reported = false

    init(startedAt: NIODeadline?) {
        self.startedAt = startedAt
    }

    /// The summary, the first time only.
    mutating func summary(of request: ProxyRequest, exchange: ExchangeState) -> RequestSummary? {
        guard !reported else { return nil }
        reported = true
        let elapsed = startedAt.map { (NIODeadline.now() - $0).nanoseconds } ?? 0
        let (status, aborted) = exchange.outcome
        return RequestSummary(
            requestId: request.requestId, method: request.method, target: request.target, upstream: upstream,
            status: status, reason: rejection?.reason, trust: outcome?.trustValue, durationNanoseconds: elapsed,
            aborted: aborted, forwardedReason: outcome?.reason,
            detail: rejection.flatMap { $0.detail.isEmpty ? nil : $0.detail })
    }
}
