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
    static let maxMethodLength = 32

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
            "method": .string(String(decoding: s.method.utf8.prefix(maxMethodLength), as: UTF8.self)),
            "path": .string(loggablePath(s.target)),
        ]
        if s.status != 0 { m["status"] = .stringConvertible(s.status) }
        if let trust = s.trust { m["trust"] = .string(trust) }
        if let upstream = s.upstream { m["route"] = .string(upstream) }
        if let detail = s.detail { m["detail"] = .string(detail) }
        return m
    }

    /// The path without its query and `;` parameters (either may carry tokens,
    /// `;jsessionid=` for one), cut to `maxPathLength`.
    static func loggablePath(_ target: String) -> String {
        var path: [UInt8] = []
        var inParameter = false
        for b in target.utf8 {
            if b == UInt8(ascii: "?") || b == UInt8(ascii: "#") { break }
            if b == UInt8(ascii: "/") { inParameter = false } else if b == UInt8(ascii: ";") { inParameter = true }
            if !inParameter { path.append(b) }
            if path.count > maxPathLength { break }
        }
        guard path.count > maxPathLength else { return String(decoding: path, as: UTF8.self) }
        return String(decoding: path.prefix(maxPathLength), as: UTF8.self) + "…"
    }
}

/// Hands every event to each observer in turn (metrics, then the log). Each
/// method of `RequestObserver` is forwarded: one left to the protocol's empty
/// default would be lost for every observer behind this one.
public final class RequestObservers: RequestObserver {
    private let observers: [any RequestObserver]

    public init(_ observers: [any RequestObserver]) {
        self.observers = observers
    }

    public func requestFinished(_ summary: RequestSummary) {
        for o in observers { o.requestFinished(summary) }
    }
    public func timedOut(_ kind: RequestTimeoutKind) {
        for o in observers { o.timedOut(kind) }
    }
    public func connectionOpened(http2: Bool) {
        for o in observers { o.connectionOpened(http2: http2) }
    }
    public func connectionClosed(http2: Bool) {
        for o in observers { o.connectionClosed(http2: http2) }
    }
    public func connectionRefused(_ reason: ConnectionRefusal) {
        for o in observers { o.connectionRefused(reason) }
    }
}
