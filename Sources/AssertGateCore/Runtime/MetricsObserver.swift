/// Counts every finished request in `assertgate_requests_total{route,status,trust}`
/// and times upstream exchanges. One per worker; the counter handles are cached
/// per loop so the hot path takes no lock.
public final class MetricsObserver: RequestObserver {
    private let metrics: GatewayMetrics
    private let counters: RequestCounterCache

    /// Per upstream, resolved once: `labels` takes the family's lock.
    private var durations: [String: Histogram] = [:]
    /// The last upstream's: compared, not hashed (see `RequestCounterCache`).
    private var lastDuration: (upstream: String, histogram: Histogram)?

    private func durationHistogram(_ upstream: String) -> Histogram {
        if let last = lastDuration, last.upstream == upstream { return last.histogram }
        let h: Histogram
        if let known = durations[upstream] {
            h = known
        } else {
            h = metrics.upstreamRequestDuration.labels(upstream)
            durations[upstream] = h
        }
        lastDuration = (upstream, h)
        return h
    }

    public init(metrics: GatewayMetrics) {
        self.metrics = metrics
        self.counters = RequestCounterCache(metrics: metrics)
    }

    public func timedOut(_ kind: RequestTimeoutKind) {
        metrics.timeout(kind).inc()
    }

    /// Resolved once: `labels` takes the family's lock.
    private lazy var openHTTP2 = metrics.openConnections.labels("h2")
    private lazy var openHTTP1 = metrics.openConnections.labels("http/1.1")

    public func connectionOpened(http2: Bool) { (http2 ? openHTTP2 : openHTTP1).inc() }
    public func connectionClosed(http2: Bool) { (http2 ? openHTTP2 : openHTTP1).dec() }
    public func connectionRefused(_ reason: ConnectionRefusal) { metrics.connectionsRefused(reason).inc() }

    public func requestFinished(_ summary: RequestSummary) {
        let route = summary.upstream ?? (summary.reason == .noRoute ? "none" : "assertgate")
        // Answers the gateway gave itself carry no trust level: errors are
        // "rejected", the challenge/attest answers "local".
        let trust = summary.trust ?? (summary.reason != nil ? "rejected" : "local")
        counters.counter(route: route, status: summary.status, trust: trust).inc()
        if let reason = summary.reason {
            metrics.rejection(reason).inc()
        } else if let reason = summary.forwardedReason {
            metrics.unverifiedForward(reason).inc()
        }
        if let upstream = summary.upstream, summary.reason == nil {
            durationHistogram(upstream).observe(elapsedNanoseconds: summary.durationNanoseconds)
        }
    }
}
