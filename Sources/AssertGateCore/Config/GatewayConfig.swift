import Foundation
import NIOCore

/// The resolved, validated configuration of docs/config.md. An immutable value:
/// a reload builds a new one and swaps it in; in-flight requests keep the old.
/// Field names follow the YAML keys. Parsing and validation live in
/// `ConfigLoader`; defaults below are those of docs/config.md.
public struct GatewayConfig: Sendable {
    public var listeners: [ListenerConfig]
    public var admin: AdminConfig
    public var apps: [AppConfig]
    public var attestation: AttestationConfig
    public var store: StoreConfig
    public var trust: TrustConfig
    /// Keyed by upstream name.
    public var upstreams: [String: UpstreamConfig]
    /// First match wins.
    public var routes: [RouteConfig]
    public var limits: LimitsConfig
    public var fraudMetric: FraudMetricConfig?
    public var deviceCheck: DeviceCheckConfig?
    public var logging: LoggingConfig

    public init(
        listeners: [ListenerConfig], admin: AdminConfig = AdminConfig(), apps: [AppConfig],
        attestation: AttestationConfig = AttestationConfig(), store: StoreConfig = .memory,
        trust: TrustConfig = TrustConfig(), upstreams: [String: UpstreamConfig],
        routes: [RouteConfig], limits: LimitsConfig = LimitsConfig(),
        fraudMetric: FraudMetricConfig? = nil, deviceCheck: DeviceCheckConfig? = nil,
        logging: LoggingConfig = LoggingConfig()
    ) {
        self.listeners = listeners
        self.admin = admin
        self.apps = apps
        self.attestation = attestation
        self.store = store
        self.trust = trust
        self.upstreams = upstreams
        self.routes = routes
        self.limits = limits
        self.fraudMetric = fraudMetric
        self.deviceCheck = deviceCheck
        self.logging = logging
    }
}

/// `host:port`, IPv6 as `[::1]:8443`.
public struct HostPort: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Both cannot be bound at once: the same port, and the same host or a
    /// wildcard on either side (`0.0.0.0` and `::` take every address, the
    /// latter both families on Linux), `localhost` read as `127.0.0.1`.
    func overlaps(_ other: HostPort) -> Bool {
        guard port == other.port, port != 0 else { return false }
        let wildcards: Set<String> = ["0.0.0.0", "::", "*", ""]
        if wildcards.contains(host) || wildcards.contains(other.host) { return true }
        func plain(_ h: String) -> String { h.lowercased() == "localhost" ? "127.0.0.1" : h.lowercased() }
        return plain(host) == plain(other.host)
    }
}

public struct ListenerConfig: Sendable {
    public var address: HostPort
    public var tls: TLSConfig?
    /// A connection must have finished its TLS handshake and chosen HTTP/1.1
    /// or HTTP/2 within this time, else it is closed.
    public var handshakeTimeout: TimeAmount = .seconds(10)
    /// A request head must be complete within this time of its start (an
    /// HTTP/1.1 head's first byte, an HTTP/2 HEADERS frame), else the
    /// connection is closed (slowloris).
    public var headerTimeout: TimeAmount = .seconds(30)
    /// An established connection with no byte read and no write for this long
    /// is closed. Longer than every upstream `responseTimeout`; nil (not set in
    /// the file) resolves at load to `defaultIdleTimeout` or the slowest
    /// upstream's responseTimeout + 30 s, whichever is longer.
    public var idleTimeout: TimeAmount?
    public static let defaultIdleTimeout: TimeAmount = .seconds(120)
    /// `idleTimeout` as used (the default when a config was built in code).
    public var effectiveIdleTimeout: TimeAmount { idleTimeout ?? Self.defaultIdleTimeout }
    public init(address: HostPort, tls: TLSConfig? = nil) {
        self.address = address
        self.tls = tls
    }
}

public struct TLSConfig: Sendable {
    public var certificate: String
    public var privateKey: String
    public init(certificate: String, privateKey: String) {
        self.certificate = certificate
        self.privateKey = privateKey
    }
}

/// A secret given inline, as `{file: PATH}` or as `{env: NAME}`; resolved at load.
public struct Secret: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        case inline
        case file(String)
        case env(String)
    }
    public var source: Source
    /// The resolved bytes (UTF-8 of the value, trailing newline of a file trimmed).
    public var value: String
    public init(source: Source, value: String) {
        self.source = source
        self.value = value
    }
}

public struct AdminConfig: Sendable {
    public var address: HostPort
    public var token: Secret?
    public init(address: HostPort = HostPort(host: "127.0.0.1", port: 9901), token: Secret? = nil) {
        self.address = address
        self.token = token
    }
}

public enum AppEnvironment: String, Sendable, Hashable, CaseIterable {
    case production
    case development
}

public struct AppConfig: Sendable {
    public var appId: String
    public var environments: Set<AppEnvironment>
    /// risk.md §2: applies on every enforce/monitor route to this app's keys.
    public var rules: RulesConfig
    public init(appId: String, environments: Set<AppEnvironment> = [.production], rules: RulesConfig = RulesConfig()) {
        self.appId = appId
        self.environments = environments
        self.rules = rules
    }
}

public struct RateConfig: Sendable, Equatable {
    public var perSecond: Double
    public var burst: Int
    public init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
    }
}

public struct AssertionHeaderNames: Sendable {
    public var keyId: String = "AssertGate-Key-Id"
    public var assertion: String = "AssertGate-Assertion"
    public var challenge: String = "AssertGate-Challenge"
    /// `DCDevice.generateToken()`, base64 (risk.md §3).
    public var deviceToken: String = "AssertGate-Device-Token"
    public init() {}
}

public struct AttestationConfig: Sendable {
    public var prefix: String = "/assertgate/v1"
    public var challengeTTL: TimeAmount = .seconds(120)
    public var challengeRate = RateConfig(perSecond: 20, burst: 40)
    /// `attestation.rampUp` (risk.md §4): `attest` challenges per second
    /// across every gateway on the store; nil = no limit.
    public var rampUp: RateConfig?
    /// PEM file paths; empty = Apple's App Attestation Root CA only.
    public var trustAnchors: [String] = []
    /// PEM file paths; empty = Apple Root CA - G3 only.
    public var receiptTrustAnchors: [String] = []
    public var clockSkew: TimeAmount = .seconds(60)
    public var headers = AssertionHeaderNames()
    public init() {}
}

public struct RedisConfig: Sendable, Equatable {
    /// `redis://[user:password@]host:port/db`, or `rediss://` for TLS
    public var url: String = "redis://127.0.0.1:6379/0"
    /// `store.redis.cluster`: seed node URLs of a Redis Cluster (then `url` is unused).
    public var cluster: [String] = []
    public var connectTimeout: TimeAmount = .seconds(1)
    public var commandTimeout: TimeAmount = .milliseconds(250)
    public var connectionsPerWorker: Int = 1
    /// `store.redis.tls` (only with `rediss://`; nil = system trust store, the URL's host).
    public var tls: ClientTLSConfig?
    /// `store.redis.password`: the AUTH password from a file or the
    /// environment, instead of one in the URL (both is a config error).
    public var password: Secret?
    public init() {}
}

/// How an outbound TLS connection (`rediss://`, an `https://` upstream)
/// verifies the server and identifies itself.
public struct ClientTLSConfig: Sendable, Equatable {
    /// PEM CA certificates the server's chain must lead to; nil = the system trust store.
    public var caFile: String?
    /// Client certificate chain and key (Redis' `tls-auth-clients yes`, an upstream's mTLS).
    public var certificate: String?
    public var privateKey: String?
    /// The name the server certificate must carry (and SNI); nil = the URL's host.
    public var serverName: String?
    public init(caFile: String? = nil, certificate: String? = nil, privateKey: String? = nil, serverName: String? = nil) {
        self.caFile = caFile
        self.certificate = certificate
        self.privateKey = privateKey
        self.serverName = serverName
    }
}

public enum StoreConfig: Sendable, Equatable {
    case memory
    case redis(RedisConfig)
}

public struct TrustConfig: Sendable {
    public var headerPrefix: String = "X-AssertGate-"
    public var signingSecret: Secret?
    public init() {}
}

public struct UpstreamEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// How the gateway speaks to the endpoint: one scheme per upstream.
    public enum Scheme: String, Sendable, Hashable, CaseIterable {
        /// HTTP/1.1, cleartext.
        case http
        /// HTTP/1.1 over TLS, the server verified (`UpstreamConfig.tls`).
        case https
        /// HTTP/2 with prior knowledge, cleartext (RFC 9113 §3.3).
        case h2c
        /// HTTP/2 over TLS (ALPN `h2`), verified as `https://` is.
        case h2

        public var tls: Bool { self == .https || self == .h2 }
        public var isHTTP2: Bool { self == .h2c || self == .h2 }
        /// What `check-config` prints.
        public var protocolName: String {
            switch self {
            case .http: return "HTTP/1.1"
            case .https: return "HTTP/1.1 over TLS"
            case .h2c: return "HTTP/2 cleartext (h2c)"
            case .h2: return "HTTP/2 over TLS (h2)"
            }
        }
    }

    public var host: String
    public var port: Int
    public var scheme: Scheme
    public var tls: Bool { scheme.tls }
    public var isHTTP2: Bool { scheme.isHTTP2 }
    public init(host: String, port: Int, scheme: Scheme) {
        self.host = host
        self.port = port
        self.scheme = scheme
    }
    public init(host: String, port: Int, tls: Bool = false) {
        self.init(host: host, port: port, scheme: tls ? .https : .http)
    }
    public var description: String { "\(scheme.rawValue)://\(HostPort(host: host, port: port))" }
}

public struct UpstreamConfig: Sendable {
    public var endpoints: [UpstreamEndpoint]
    /// How `https://` endpoints are verified (nil = the system trust store and
    /// the endpoint's host) and whether the gateway shows a client certificate.
    public var tls: ClientTLSConfig?
    public var connectTimeout: TimeAmount = .seconds(2)
    public var responseTimeout: TimeAmount = .seconds(30)
    public var idleTimeout: TimeAmount = .seconds(60)
    public var maxConnectionsPerEndpoint: Int = 64
    /// How many of an endpoint's connections (per worker) one client address
    /// may hold at once; its further requests wait for one of its own. nil
    /// (not set in the file): half of `maxConnectionsPerEndpoint`, rounded up,
    /// so a few sockets from one address cannot starve everyone else.
    public var maxConnectionsPerClient: Int?
    /// `h2c://`/`h2://`: the most streams the gateway opens on one
    /// connection, also bounded by the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    public var maxStreamsPerConnection: Int = 100
    /// Requests the endpoint can carry at once, per worker: a connection
    /// each over HTTP/1.1, `maxStreamsPerConnection` per connection over HTTP/2.
    public var inFlightCapacity: Int {
        let conns = max(1, maxConnectionsPerEndpoint)
        return isHTTP2 ? conns * max(1, maxStreamsPerConnection) : conns
    }
    /// A client's requests in flight at one endpoint (per worker): over
    /// HTTP/1.1 each holds a connection; over HTTP/2, a stream. Default half
    /// of `inFlightCapacity`.
    public var effectiveMaxConnectionsPerClient: Int {
        let cap = inFlightCapacity
        return min(cap, max(1, maxConnectionsPerClient ?? (cap + 1) / 2))
    }
    public var isHTTP2: Bool { endpoints.first?.isHTTP2 ?? false }
    public init(endpoints: [UpstreamEndpoint]) {
        self.endpoints = endpoints
    }
}

public enum RouteMatchKind: Sendable, Equatable {
    case prefix(String)
    case exact(String)
}

public struct RouteMatch: Sendable {
    public var kind: RouteMatchKind
    /// Upper-case method names; nil = any method.
    public var methods: Set<String>?
    public init(kind: RouteMatchKind, methods: Set<String>? = nil) {
        self.kind = kind
        self.methods = methods
    }
}

public enum PolicyMode: String, Sendable, Equatable {
    case enforce
    case monitor
    case passthrough
}

public enum StoreErrorAction: String, Sendable, Equatable {
    case reject
    case forward
}

/// What a route asks DeviceCheck (risk.md §3).
public enum DeviceCheckMode: String, Sendable, Equatable, CaseIterable {
    case none
    /// `validate_device_token`: is this a genuine device's token.
    case validate
    /// `query_two_bits`: validates too, and reads the device's bits.
    case query
}

/// What a route accepts from a request without assertion headers.
public enum RouteFallback: String, Sendable, Equatable, CaseIterable {
    /// A valid, first-use device token: forwarded with `trust=device`.
    case device
}

/// One route. Its fields live in one immutable box: a request copies its
/// route several times on the way (selection, the pipeline's stages), and a
/// copy of the box is one reference count where the fields themselves took
/// one per string, set and rule list (about 12; BENCHMARKS.md §4e). Setting a
/// field (configuration loading only) makes a new box.
public struct RouteConfig: Sendable {
    private struct Fields: Sendable {
        var match: RouteMatch
        var upstream: String
        var mode: PolicyMode
        var challengeRequired = false
        var bindBody = true
        var maxBodyBytes = 1 << 20
        var onStoreError: StoreErrorAction
        var rules = RulesConfig()
        var forwardAssertionHeaders = false
        var deviceCheck: DeviceCheckMode = .none
        var fallback: RouteFallback?
        var onDeviceCheckError: StoreErrorAction
        var limits = RouteLimits()
        /// Not configuration: what the route's snapshot resolved `upstream` to.
        var resolvedUpstream: ResolvedUpstream?
    }

    private final class Box: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    private func with(_ change: (inout Fields) -> Void) -> Box {
        var f = box.fields
        change(&f)
        return Box(f)
    }

    public var match: RouteMatch {
        get { box.fields.match }
        set { box = with { $0.match = newValue } }
    }
    public var upstream: String {
        get { box.fields.upstream }
        set { box = with { $0.upstream = newValue } }
    }
    public var mode: PolicyMode {
        get { box.fields.mode }
        set { box = with { $0.mode = newValue } }
    }
    public var challengeRequired: Bool {
        get { box.fields.challengeRequired }
        set { box = with { $0.challengeRequired = newValue } }
    }
    public var bindBody: Bool {
        get { box.fields.bindBody }
        set { box = with { $0.bindBody = newValue } }
    }
    public var maxBodyBytes: Int {
        get { box.fields.maxBodyBytes }
        set { box = with { $0.maxBodyBytes = newValue } }
    }
    /// Resolved: reject for enforce, forward for monitor unless set explicitly.
    public var onStoreError: StoreErrorAction {
        get { box.fields.onStoreError }
        set { box = with { $0.onStoreError = newValue } }
    }
    /// risk.md §2: per key, replaces the app's value in the same block.
    public var rules: RulesConfig {
        get { box.fields.rules }
        set { box = with { $0.rules = newValue } }
    }
    /// The old route key, an alias of `rules.require.maxRiskMetric`.
    public var maxRiskMetric: Int? {
        get { rules.require.maxRiskMetric }
        set { rules.require.maxRiskMetric = newValue }
    }
    public var forwardAssertionHeaders: Bool {
        get { box.fields.forwardAssertionHeaders }
        set { box = with { $0.forwardAssertionHeaders = newValue } }
    }
    public var deviceCheck: DeviceCheckMode {
        get { box.fields.deviceCheck }
        set { box = with { $0.deviceCheck = newValue } }
    }
    public var fallback: RouteFallback? {
        get { box.fields.fallback }
        set { box = with { $0.fallback = newValue } }
    }
    /// Resolved like `onStoreError`: reject for enforce, forward for monitor.
    public var onDeviceCheckError: StoreErrorAction {
        get { box.fields.onDeviceCheckError }
        set { box = with { $0.onDeviceCheckError = newValue } }
    }
    /// What the route changes of the limits every request has.
    public var limits: RouteLimits {
        get { box.fields.limits }
        set { box = with { $0.limits = newValue } }
    }
    /// Set by `GatewaySnapshot` on the routes it selects from: the upstream
    /// looked up once per snapshot, not hashed for on every request.
    var resolvedUpstream: ResolvedUpstream? {
        get { box.fields.resolvedUpstream }
        set { box = with { $0.resolvedUpstream = newValue } }
    }
    public init(match: RouteMatch, upstream: String, mode: PolicyMode) {
        box = Box(
            Fields(
                match: match, upstream: upstream, mode: mode, onStoreError: mode == .enforce ? .reject : .forward,
                onDeviceCheckError: mode == .enforce ? .reject : .forward))
    }
}

/// A route's own values of the limits on a request's body and on the wait for
/// its answer (`routes[].limits`); nil keeps the global value
/// (`limits.*`), or the upstream's for `responseTimeout`. Long-lived streams
/// (a gRPC chat, a server-sent subscription) need more than an ordinary
/// request, and raising the global limits would loosen them for every route.
public struct RouteLimits: Sendable, Equatable {
    public var maxRequestBodyBytes: Int?
    public var requestBodyTimeout: TimeAmount?
    public var minRequestBodyRate: Int?
    public var responseTimeout: TimeAmount?
    public init() {}

    public var isEmpty: Bool { self == RouteLimits() }

    /// The body limits a request on the route has, `global` where the route sets none.
    public func body(_ global: LimitsConfig) -> BodyLimits {
        BodyLimits(
            maxBytes: maxRequestBodyBytes ?? global.maxRequestBodyBytes,
            timeout: requestBodyTimeout ?? global.requestBodyTimeout,
            minRate: minRequestBodyRate ?? global.minRequestBodyRate)
    }
}

/// The three limits a request body is held to, resolved for its route.
public struct BodyLimits: Sendable, Equatable {
    public var maxBytes: Int
    public var timeout: TimeAmount
    public var minRate: Int

    public init(_ global: LimitsConfig) {
        self.init(maxBytes: global.maxRequestBodyBytes, timeout: global.requestBodyTimeout, minRate: global.minRequestBodyRate)
    }

    public init(maxBytes: Int, timeout: TimeAmount, minRate: Int) {
        self.maxBytes = maxBytes
        self.timeout = timeout
        self.minRate = minRate
    }
}

public struct LimitsConfig: Sendable {
    public var maxConcurrentStreams: Int = 100
    public var maxHeaderListBytes: Int = 64 << 10
    public var maxRequestBodyBytes: Int = 16 << 20
    public var streamResetRate = RateConfig(perSecond: 1000, burst: 1000)
    /// A request body with no byte for this long is answered `408
    /// request-timeout` (or its stream reset once the answer has begun) and its
    /// upstream connection closed. Also the grace period of `minRequestBodyRate`.
    public var requestBodyTimeout: TimeAmount = .seconds(10)
    /// After `requestBodyTimeout`, a body arriving slower than this (bytes per
    /// second, averaged since its head) is refused the same way: a trickle of
    /// one byte every few seconds would never trip the plain timeout. 0: off.
    /// Time the gateway itself holds the body back (its upstream is slow to
    /// take it) is not held against the client.
    public var minRequestBodyRate: Int = 1024
    /// A response whose bytes the client has not taken for this long (the
    /// socket or the stream's flow-control window stays full) is reset and its
    /// upstream connection closed.
    public var streamWriteTimeout: TimeAmount = .seconds(30)
    /// An HTTP/2 stream with response bytes waiting must take at least this
    /// many a second, averaged over `streamWriteTimeout`, or it is reset: a
    /// window opened a byte at a time never looks shut. 0: off.
    public var minResponseRate: Int = 1024
    /// Per worker: request bodies held in memory at once for assertion checks
    /// (`bindBody`) and the gateway's own routes. A request that would go over
    /// is answered `503 gateway-busy` with `Retry-After`. nil (not set in the
    /// file): `defaultMaxBufferedBodyBytes`, sized for the machine.
    public var maxBufferedBodyBytes: Int?
    public var effectiveMaxBufferedBodyBytes: Int { maxBufferedBodyBytes ?? Self.defaultMaxBufferedBodyBytes }
    /// An eighth of physical memory shared by the workers, between 16 MiB and 512 MiB each.
    public static var defaultMaxBufferedBodyBytes: Int {
        let workers = max(1, System.coreCount)
        let share = Int(clamping: ProcessInfo.processInfo.physicalMemory / 8) / workers
        return min(512 << 20, max(16 << 20, share))
    }
    /// Per worker: response bytes queued for HTTP/2 clients that have not
    /// taken them yet. Past it, a stream that took nothing for a tick of the
    /// stall watch (at most a second) is reset as a stalled one would be
    /// after `streamWriteTimeout`. nil (not set in the file):
    /// `defaultMaxBufferedBodyBytes`, the same share of memory.
    public var maxQueuedResponseBytes: Int?
    public var effectiveMaxQueuedResponseBytes: Int { maxQueuedResponseBytes ?? Self.defaultMaxBufferedBodyBytes }
    /// Client connections open at once in the process (every listener and
    /// worker); past it new ones are closed as they are accepted. nil (not
    /// set in the file): `defaultMaxConnections`, sized for the descriptor limit.
    public var maxConnections: Int?
    public var effectiveMaxConnections: Int { maxConnections ?? Self.defaultMaxConnections }
    /// Half the descriptors the process may open now (`serve` raises its
    /// soft limit to the hard one first): the other half stays for upstream
    /// and store connections, so a flood of clients cannot leave the gateway
    /// unable to reach its upstreams.
    public static var defaultMaxConnections: Int {
        max(64, FileDescriptorLimit.current / 2)
    }
    /// Client connections open at once from one IPv4 address or one IPv6 /64.
    /// nil: no cap (clients behind one NAT share an address).
    public var maxConnectionsPerAddress: Int?
    /// Request headers whose names contain `_`: CGI-style upstreams (WSGI,
    /// Rack, PHP) read `X_Forwarded_For` as `X-Forwarded-For`.
    public var underscoresInHeaders: UnderscoreHeaderPolicy = .drop
    public init() {}
}

/// What happens to a request header whose name contains `_` (nginx's
/// `underscores_in_headers off` drops them).
public enum UnderscoreHeaderPolicy: String, Sendable, CaseIterable {
    /// Removed before anything reads the headers.
    case drop
    /// The request is answered `400 malformed-request`.
    case reject
    /// Forwarded, except names that read as the trust prefix or a forwarding
    /// header once `_` is read as `-`.
    case allow
}

public struct FraudMetricConfig: Sendable {
    public var teamId: String
    public var keyId: String
    public var privateKey: Secret
    /// For production keys.
    public var baseURL: String = "https://data.appattest.apple.com"
    /// For development keys.
    public var developmentBaseURL: String = "https://data-development.appattest.apple.com"
    public var refreshEvery: TimeAmount = .hours(24)
    /// How often the refresh schedule is checked for due keys.
    public var pollEvery: TimeAmount = .seconds(30)
    /// PEM CA certificates for `baseURL`'s server; nil = the system trust store.
    public var caFile: String?
    public init(teamId: String, keyId: String, privateKey: Secret) {
        self.teamId = teamId
        self.keyId = keyId
        self.privateKey = privateKey
    }
}

public enum LogFormat: String, Sendable {
    case json
    case text
}

public struct LoggingConfig: Sendable {
    public var level: String = "info"
    public var format: LogFormat = .json
    public init() {}
}
