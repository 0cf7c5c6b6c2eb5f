#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import NIOCore
import NIOHTTP1
import Verifier

/// What a front end hands the policy layer: the request as received, after the
/// client's spoofed trust headers were removed (so a gate can never read one).
public struct ProxyRequest {
    public var method: String
    /// The request target exactly as received (`:path` / HTTP/1.1 request-target).
    public var target: String
    public var authority: String?
    /// `http` or `https`: the scheme the client used to reach the gateway.
    public var scheme: String
    /// Client headers minus every header with the trust prefix. Assertion headers are still present.
    public var headers: HTTPHeaders
    public var requestId: String
    public var clientAddress: String?
    /// The configuration snapshot this request runs on (stays fixed across reloads).
    public var snapshot: GatewaySnapshot
    /// Every field name and value was checked on intake as the upstream head
    /// writer would check it (HTTP/2: nghttp2's HTTP messaging rules), so the
    /// writer copies them without a second pass (`UpstreamHeadWriter.addClientField`).
    var fieldsChecked = false

    /// The path without the query string.
    public var path: Substring {
        // memchr over the string's own bytes (any other string's copied
        // once): the generic `firstIndex(of:)` on a UTF8View cost ~40
        // instructions a byte.
        func query(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
            guard let base = bytes.baseAddress, let q = memchr(base, Int32(UInt8(ascii: "?")), bytes.count) else {
                return nil
            }
            return base.distance(to: q.assumingMemoryBound(to: UInt8.self))
        }
        let utf8 = target.utf8
        guard let end = utf8.withContiguousStorageIfAvailable(query) ?? Array(utf8).withUnsafeBufferPointer(query) else {
            return target[...]
        }
        return target[..<utf8.index(utf8.startIndex, offsetBy: end)]
    }
}

/// How much of the request body a gate needs before it can decide.
public enum GateBodyPolicy: Sendable, Equatable {
    /// Decide on the head alone; the body streams to the upstream.
    case stream
    /// Buffer the whole body up to `limit` bytes (more → 413 body-too-large), then decide.
    case buffer(limit: Int)
}

public enum GateDecision: Sendable {
    /// Forward, carrying what the gate concluded: the pipeline renders the
    /// trust headers from it once, and reads trust and reason for metrics
    /// and the log from it, typed.
    case forward(TrustOutcome)
    /// Answer the rejection's problem+json.
    case reject(Rejection)
}

/// A gate answers synchronously when it can (no future allocated on the fast path).
public enum GateOutcome {
    case decided(GateDecision)
    case pending(EventLoopFuture<GateDecision>)
}

/// The policy hook. One instance per worker (event loop), made by
/// `GatewayHooks.makeGate`; every call happens on that loop, so an
/// implementation may keep loop-confined state (a Redis connection, a key cache).
public protocol RequestGate: AnyObject {
    func bodyPolicy(for request: ProxyRequest, route: RouteConfig) -> GateBodyPolicy
    /// `body` is non-nil exactly when `bodyPolicy` asked for `.buffer`.
    func evaluate(_ request: ProxyRequest, route: RouteConfig, body: ByteBuffer?) -> GateOutcome
    /// The stored environment of the key the request names, once known (nil
    /// inside: no such key). nil: this gate knows no keys. DeviceCheck picks
    /// its host by it (risk.md §6.3).
    func keyEnvironment(for request: ProxyRequest) -> EventLoopFuture<AppEnvironment?>?
    /// A rule evaluated after the gate (`deviceBits`, once DeviceCheck
    /// answered), for the gate's rule metrics.
    func ruleEvaluated(_ key: RuleKey, _ result: RuleResult, route: RouteConfig)
}

extension RequestGate {
    public func keyEnvironment(for request: ProxyRequest) -> EventLoopFuture<AppEnvironment?>? { nil }
    public func ruleEvaluated(_ key: RuleKey, _ result: RuleResult, route: RouteConfig) {}
}

/// Passthrough: forward everything with `<prefix>Trust: none`.
public final class PassthroughGate: RequestGate {
    public init() {}
    public func bodyPolicy(for request: ProxyRequest, route: RouteConfig) -> GateBodyPolicy { .stream }
    public func evaluate(_ request: ProxyRequest, route: RouteConfig, body: ByteBuffer?) -> GateOutcome {
        .decided(.forward(.none))
    }
}

/// A response the gateway produces itself (challenge/attest routes).
public struct LocalResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: ByteBuffer
    /// Set when this is a problem answer: counted and logged like the pipeline's own.
    public var reason: ReasonToken?
    /// Which check failed, for the log (never secret material).
    public var detail: String?
    public init(
        status: Int, headers: [(String, String)], body: ByteBuffer, reason: ReasonToken? = nil, detail: String? = nil
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.reason = reason
        self.detail = detail
    }
}

/// Routes served by the gateway itself, checked before the route table. One
/// instance per worker, loop-confined like `RequestGate`.
public protocol LocalHandler: AnyObject {
    /// Whether this handler serves `path` (any method; it answers 405 itself).
    func claims(path: Substring, snapshot: GatewaySnapshot) -> Bool
    /// Bodies above this are answered `413 body-too-large` without calling `handle`.
    var maxBodyBytes: Int { get }
    func handle(_ request: ProxyRequest, body: ByteBuffer) -> EventLoopFuture<LocalResponse>
}

/// What happened to one request, reported when the pipeline is done with it.
public struct RequestSummary: Sendable {
    public var requestId: String
    public var method: String
    /// The request target as received (may contain a query string).
    public var target: String
    /// The upstream name of the matched route; nil for local handlers and no-route.
    public var upstream: String?
    /// The status sent to the client; 0 when the client went away or the stream was reset first.
    public var status: Int
    /// Set when the gateway answered itself (problem+json) for this reason.
    public var reason: ReasonToken?
    /// The trust level forwarded upstream; nil when the gateway answered itself.
    public var trust: String?

    public var durationNanoseconds: Int64
    /// `true` when the response could not be completed (reset / connection closed).
    public var aborted: Bool
    /// Forwarded without a verified assertion (monitor, `onStoreError: forward`): why.
    public var forwardedReason: ReasonToken? = nil
    /// The attest route's failed check, when it answered a problem.
    public var detail: String? = nil
}

extension RequestSummary {
    /// A request refused at its head, before any pipeline existed (HTTP/1.1 431 or
    /// parse error, an HTTP/2 header list over the limit): `status` 0 when the
    /// refusal is a stream reset rather than an answer.
    static func refusedHead(
        requestId: String, method: String, target: String, status: Int, reason: ReasonToken
    ) -> RequestSummary {
        RequestSummary(
            requestId: requestId, method: method, target: target, upstream: nil, status: status, reason: reason,
            trust: nil, durationNanoseconds: 0, aborted: status == 0)
    }
}

/// A per-request clock that ran out (`assertgate_timeouts_total{kind}`).
public enum RequestTimeoutKind: String, Sendable, CaseIterable {
    /// `limits.requestBodyTimeout` / `minRequestBodyRate`: the client's body stalled or trickled.
    case requestBody = "request_body"
    /// `limits.streamWriteTimeout`: the client stopped taking the response.
    case streamWrite = "stream_write"
}

/// Metrics/access-log hook, one per worker, loop-confined.
public protocol RequestObserver: AnyObject {
    func requestFinished(_ summary: RequestSummary)
    func timedOut(_ kind: RequestTimeoutKind)
    /// A client connection chose its protocol / closed (`assertgate_open_connections`).
    func connectionOpened(http2: Bool)
    func connectionClosed(http2: Bool)
    /// A client connection was closed as it was accepted (a connection cap).
    func connectionRefused(_ reason: ConnectionRefusal)
}

extension RequestObserver {
    public func timedOut(_ kind: RequestTimeoutKind) {}
    public func connectionOpened(http2: Bool) {}
    public func connectionClosed(http2: Bool) {}
    public func connectionRefused(_ reason: ConnectionRefusal) {}
}

/// Factories for the per-worker hooks (each called once per event loop).
public struct GatewayHooks: Sendable {
    public var makeGate: @Sendable (any EventLoop) -> any RequestGate
    public var makeLocalHandlers: @Sendable (any EventLoop) -> [any LocalHandler]
    public var makeObserver: @Sendable (any EventLoop) -> (any RequestObserver)?
    /// Routes with `deviceCheck` (nil: no `deviceCheck:` section; such routes see `unavailable`).
    var makeDeviceCheck: (@Sendable (any EventLoop) -> DeviceCheckService)?
    /// `assertgate_open_streams`: each worker counts the pipelines it has
    /// open on its own loop, and this gauge reads them (no call per request
    /// through the observers).
    public var openStreams: Gauge?
    /// `assertgate_queued_response_bytes`: read the same way from each worker.
    public var queuedResponseBytes: Gauge?
    public init(
        makeGate: @escaping @Sendable (any EventLoop) -> any RequestGate = { _ in PassthroughGate() },
        makeLocalHandlers: @escaping @Sendable (any EventLoop) -> [any LocalHandler] = { _ in [] },
        makeObserver: @escaping @Sendable (any EventLoop) -> (any RequestObserver)? = { _ in nil },
        openStreams: Gauge? = nil, queuedResponseBytes: Gauge? = nil
    ) {
        self.makeGate = makeGate
        self.makeLocalHandlers = makeLocalHandlers
        self.makeObserver = makeObserver
        self.openStreams = openStreams
        self.queuedResponseBytes = queuedResponseBytes
    }
}
