import Logging
import Verifier

/// One log line per request the gateway refused (`info`) or forwarded without
/// a verified assertion (`debug`), carrying the same reason token as the
/// problem body, the trust header and the metrics (protocol.md §5).
/// Never the assertion, challenge or query string: only what identifies the
/// request and why it failed.
public final class RequestLog: RequestObserver {
    private let logger: Logger
    /// Long paths are cut: a log line should not grow with an attacker's input.
    static let maxPathLength = 256

    public init(logger: Logger) {
        self.logger = logger
    }

    public func requestFinished(_ summary: RequestSummary) {
        if let reason = summary.reason {
            logger.info("request refused", metadata: Self.metadata(summary, reason))
        } else if let reason = summary.forwardedReason {
            logger.debug("request forwarded unverified", metadata: Self.metadata(summary, reason))
        }
    }

    static func metadata(_ s: RequestSummary, _ reason: ReasonToken) -> Logger.Metadata {
        var m: Logger.Metadata = [
            "requestId": .string(s.requestId),
            "reason": .string(reason.rawValue),
            "method": .string(s.method),
            "path": .string(loggablePath(s.target)),
        ]
        if s.status != 0 { m["status"] = .stringConvertible(s.status) }
        if let trust = s.trust { m["trust"] = .string(trust) }
        if let upstream = s.upstream { m["route"] = .string(upstream) }
        if let detail = s.detail { m["detail"] = .string(detail) }
        return m
    }

    /// The path without its query (which may carry tokens), cut to `maxPathLength`.
    static func loggablePath(_ target: String) -> String {
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard path.utf8.count > maxPathLength else { return String(path) }
        return String(decoding: path.utf8.prefix(maxPathLength), as: UTF8.self) + "…"
    }
}

/// Hands every finished request to each observer in turn (metrics, then the log).
public final class RequestObservers: RequestObserver {
    private let observers: [any RequestObserver]

    public init(_ observers: [any RequestObserver]) {
        self.observers = observers
    }

    public func requestFinished(_ summary: RequestSummary) {
        for o in observers { o.requestFinished(summary) }
    }
}
