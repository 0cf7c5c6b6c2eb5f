import Verifier

/// The gateway's series, registered once. Hot-path callers resolve label sets
/// once (per route, per worker) and keep the handles.
public final class GatewayMetrics: Sendable {
    public let registry: MetricsRegistry
    /// `assertgate_requests_total{route,status,trust}`
    public let requests: MetricFamilyOf<Counter>
    /// `assertgate_rejections_total{reason}`
    public let rejections: MetricFamilyOf<Counter>
    /// `assertgate_unverified_forwards_total{reason}`
    public let unverifiedForwards: MetricFamilyOf<Counter>
    /// `assertgate_upstream_request_duration_seconds{upstream}`
    public let upstreamRequestDuration: MetricFamilyOf<Histogram>
    /// `assertgate_enforcement_duration_seconds{mode}` (`enforce`, `monitor`)
    public let enforcementDuration: MetricFamilyOf<Histogram>
    /// `assertgate_open_connections{protocol}` (`http/1.1`, `h2`)
    public let openConnections: MetricFamilyOf<Gauge>
    /// `assertgate_open_streams`
    public let openStreams: Gauge
    public let queuedResponseBytes: Gauge
    /// `assertgate_connections_refused_total{reason}` (`ConnectionRefusal`)
    public let connectionsRefusedTotal: MetricFamilyOf<Counter>
    private let refusedByReason: [ConnectionRefusal: Counter]
    public func connectionsRefused(_ reason: ConnectionRefusal) -> Counter {
        refusedByReason[reason] ?? connectionsRefusedTotal.labels(reason.rawValue)
    }
    /// `assertgate_store_errors_total`
    public let storeErrors: Counter
    /// `assertgate_config_reloads_total{result}` (`success`, `failure`)
    public let configReloads: MetricFamilyOf<Counter>
    /// `assertgate_receipt_refreshes_total{result}` (see `ReceiptRefreshResult`)
    public let receiptRefreshes: MetricFamilyOf<Counter>
    /// `assertgate_devicecheck_calls_total{call, result}` (risk.md §3).
    public let deviceCheckCalls: MetricFamilyOf<Counter>
    public let deviceCheckDuration: MetricFamilyOf<Histogram>
    public let deviceCheckQueueDepth: Gauge
    /// Redis Cluster only: redirects followed and slot-map reads.
    public let redisCluster: RedisClusterMetrics

    /// `assertgate_timeouts_total{kind}` (`RequestTimeoutKind`)
    public let timeouts: MetricFamilyOf<Counter>
    private let timeoutByKind: [RequestTimeoutKind: Counter]

    public func timeout(_ kind: RequestTimeoutKind) -> Counter {
        // Every kind is registered in init.
        timeoutByKind[kind] ?? timeouts.labels(kind.rawValue)
    }

    /// `assertgate_malformed_extensions_total{key}`: a known authenticator-data
    /// extension with a bad value, treated as absent (risk.md §1). Bounded:
    /// only the known keys are labels.
    public let malformedExtensions: MetricFamilyOf<Counter>
    private let malformedByKey: [String: Counter]

    /// `assertgate_rule_results_total{route, rule, result}` (risk.md §2; the
    /// always-on environment and App ID checks count as `environments`).
    public let ruleResults: MetricFamilyOf<Counter>
    /// `assertgate_verified_requests_total{route, environment, launch_category}`:
    /// the category's name, `missing`, or `other` for unnamed numbers (bounded).
    public let verifiedRequests: MetricFamilyOf<Counter>

    /// `assertgate_attest_challenges_total{result}` (risk.md §4): `attest`
    /// challenges issued, and refused past the ramp-up budget.
    public let attestChallengesIssued: Counter
    public let attestChallengesRampLimited: Counter

    private let rejectionByReason: [ReasonToken: Counter]
    private let unverifiedByReason: [ReasonToken: Counter]

    public init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        requests = registry.counter(
            "assertgate_requests_total", help: "Requests answered, by route, HTTP status and trust level.",
            labelNames: ["route", "status", "trust"])
        rejections = registry.counter(
            "assertgate_rejections_total", help: "Requests the gateway answered itself with an error, by reason token.",
            labelNames: ["reason"])
        unverifiedForwards = registry.counter(
            "assertgate_unverified_forwards_total",
            help: "Requests forwarded upstream although their assertion check failed or could not run "
                + "(monitor routes, onStoreError: forward), by reason token.",
            labelNames: ["reason"])
        upstreamRequestDuration = registry.histogram(
            "assertgate_upstream_request_duration_seconds",
            help: "Time a forwarded request took, from its head to its response's end (the whole exchange: "
                + "the client's body, the check, the upstream's answer and its delivery).",
            labelNames: ["upstream"])
        enforcementDuration = registry.histogram(
            "assertgate_enforcement_duration_seconds",
            help: "Time the assertion check of a request took, from its complete head (and bound body) to the decision: "
                + "header and assertion parsing, signature, the store commit (or key load).",
            labelNames: ["mode"], buckets: Self.enforcementBuckets)
        openConnections = registry.gauge(
            "assertgate_open_connections", help: "Open downstream connections by protocol.", labelNames: ["protocol"])
        openStreams = registry.gauge("assertgate_open_streams", help: "Open HTTP/2 streams and HTTP/1.1 requests in flight.")
            .labels()
        queuedResponseBytes = registry.gauge(
            "assertgate_queued_response_bytes", help: "Response bytes queued for HTTP/2 clients that have not taken them yet.")
            .labels()
        connectionsRefusedTotal = registry.counter(
            "assertgate_connections_refused_total",
            help: "Client connections closed as they were accepted, by the limit they met: "
                + "max-connections (limits.maxConnections), max-connections-per-address (limits.maxConnectionsPerAddress).",
            labelNames: ["reason"])
        refusedByReason = Dictionary(
            uniqueKeysWithValues: ConnectionRefusal.allCases.map { [connectionsRefusedTotal] in ($0, connectionsRefusedTotal.labels($0.rawValue)) })
        storeErrors = registry.counter("assertgate_store_errors_total", help: "Store (Redis) commands that failed or timed out.")
            .labels()
        configReloads = registry.counter(
            "assertgate_config_reloads_total", help: "Configuration reloads by result.", labelNames: ["result"])
        receiptRefreshes = registry.counter(
            "assertgate_receipt_refreshes_total", help: "Receipt refreshes with Apple's App Attest data endpoint, by result.",
            labelNames: ["result"])
        deviceCheckCalls = registry.counter(
            "assertgate_devicecheck_calls_total",
            help: "DeviceCheck work by call (validate, query, update) and result: ok, unset, invalid-token, reused, "
                + "unauthorized, throttled, failed, no-token, expired.",
            labelNames: ["call", "result"])
        deviceCheckDuration = registry.histogram(
            "assertgate_devicecheck_duration_seconds",
            help: "Time a request's DeviceCheck work took (the first-use claim and Apple's answer, together).",
            labelNames: ["call"])
        deviceCheckQueueDepth = registry.gauge(
            "assertgate_devicecheck_update_queue_depth",
            help: "DeviceCheck bit updates queued in the store and not yet delivered (all gateways on the store).")
            .labels()
        let redirects = registry.counter(
            "assertgate_redis_cluster_redirects_total",
            help: "Redis Cluster answers the client followed: MOVED, ASK, TRYAGAIN.", labelNames: ["kind"])
        let maps = registry.counter(
            "assertgate_redis_cluster_map_refreshes_total", help: "Reads of the Redis Cluster slot map, by result.",
            labelNames: ["result"])
        redisCluster = RedisClusterMetrics(
            moved: redirects.labels("moved"), ask: redirects.labels("ask"), tryAgain: redirects.labels("tryagain"),
            mapRefreshed: maps.labels("success"), mapRefreshFailed: maps.labels("failure"))
        timeouts = registry.counter(
            "assertgate_timeouts_total",
            help: "Requests ended by a per-request clock: request_body (a stalled or trickled request body), "
                + "stream_write (a client that stopped taking its response).",
            labelNames: ["kind"])
        var byKind: [RequestTimeoutKind: Counter] = [:]
        for kind in RequestTimeoutKind.allCases { byKind[kind] = timeouts.labels(kind.rawValue) }
        timeoutByKind = byKind
        malformedExtensions = registry.counter(
            "assertgate_malformed_extensions_total",
            help: "Known authenticator-data extensions (attestations and assertions) whose value had the wrong type "
                + "or length and was treated as absent, by key.",
            labelNames: ["key"])
        ruleResults = registry.counter(
            "assertgate_rule_results_total",
            help: "Risk rules evaluated on verified assertions, by route (its upstream), rule and result.",
            labelNames: ["route", "rule", "result"])
        verifiedRequests = registry.counter(
            "assertgate_verified_requests_total",
            help: "Requests forwarded with trust=verified, by route (its upstream), key environment and launch category.",
            labelNames: ["route", "environment", "launch_category"])
        let attestChallenges = registry.counter(
            "assertgate_attest_challenges_total",
            help: "Challenges of purpose attest: issued, or refused (429) past attestation.rampUp.",
            labelNames: ["result"])
        attestChallengesIssued = attestChallenges.labels("issued")
        attestChallengesRampLimited = attestChallenges.labels("ramp-limited")
        var malformed: [String: Counter] = [:]
        for key in AuthenticatorExtensions.knownKeys { malformed[key] = malformedExtensions.labels(key) }
        malformedByKey = malformed
        var table: [ReasonToken: Counter] = [:]
        var unverified: [ReasonToken: Counter] = [:]
        for reason in ReasonToken.allCases {
            table[reason] = rejections.labels(reason.rawValue)
            unverified[reason] = unverifiedForwards.labels(reason.rawValue)
        }
        rejectionByReason = table
        unverifiedByReason = unverified
        // Pre-create the reload results so dashboards see zeros.
        _ = configReloads.labels("success")
        _ = configReloads.labels("failure")
    }

    /// Sub-millisecond resolution: a verify is tens of µs and a commit one
    /// Redis round trip, so Prometheus' default buckets (from 5 ms) would put
    /// nearly every request in the first one.
    public static let enforcementBuckets: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5,
    ]

    /// Lock-free: the table is built at init.
    public func rejection(_ reason: ReasonToken) -> Counter {
        rejectionByReason[reason] ?? rejections.labels(reason.rawValue)
    }

    /// The counter of a known extension key (`malformedKeys` names only those).
    public func malformedExtension(_ key: String) -> Counter {
        malformedByKey[key] ?? malformedExtensions.labels("other")
    }

    public func unverifiedForward(_ reason: ReasonToken) -> Counter {
        unverifiedByReason[reason] ?? unverifiedForwards.labels(reason.rawValue)
    }
}

/// `assertgate_requests_total` handles cached per worker: after warm-up a
/// request costs one dictionary lookup and one relaxed atomic add, no lock.
/// Deliberately not `Sendable`: keep one per event loop.
public final class RequestCounterCache {
    private struct Key: Hashable {
        var route: String
        var status: Int
        var trust: String
    }

    private let family: MetricFamilyOf<Counter>
    private var cache: [Key: Counter] = [:]
    /// The last label set and its counter: a worker's requests mostly repeat
    /// one, and comparing two strings (the same storage, usually: the
    /// route's name, a literal) costs less than hashing them.
    private var last: (key: Key, counter: Counter)?

    public init(metrics: GatewayMetrics) {
        family = metrics.requests
    }

    public func counter(route: String, status: Int, trust: String) -> Counter {
        if let last, last.key.status == status, last.key.route == route, last.key.trust == trust {
            return last.counter
        }
        let key = Key(route: route, status: status, trust: trust)
        let counter: Counter
        if let known = cache[key] {
            counter = known
        } else {
            counter = family.labels(route, String(status), trust)
            cache[key] = counter
        }
        last = (key, counter)
        return counter
    }
}
