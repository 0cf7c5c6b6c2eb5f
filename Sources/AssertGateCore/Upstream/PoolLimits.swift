import NIOCore

/// What an endpoint pool reads of its upstream's config on every lease, kept
/// as numbers. Storing the config itself on each lease retained and released
/// its endpoint list and TLS strings, and each `config?.x` read copied it
/// whole; the config is now stored only when a connection may be made from
/// it (a connect, a waiter).
struct PoolLimits {
    /// `effectiveMaxConnectionsPerClient` (no config yet: no limit).
    var perClient = Int.max
    /// `maxConnectionsPerEndpoint`, at least 1.
    var connections = 1
    var connectTimeout: TimeAmount = .seconds(2)
    var responseTimeout: TimeAmount = .seconds(30)
    var idleTimeout: TimeAmount = .seconds(60)

    init() {}

    init(_ config: UpstreamConfig) {
        perClient = config.effectiveMaxConnectionsPerClient
        connections = max(1, config.maxConnectionsPerEndpoint)
        connectTimeout = config.connectTimeout
        responseTimeout = config.responseTimeout
        idleTimeout = config.idleTimeout
    }
}

/// Which configuration an endpoint pool keeps: the newest it was leased
/// with. A request keeps the snapshot it started on and may lease long after
/// a reload (a bound body, a store call, a retry); its older limits must not
/// come back.
struct ConfigGeneration {
    private var generation: UInt64 = 0
    private var adopted = false

    /// Whether a lease from snapshot `offered` replaces the pool's
    /// configuration: the first, a newer one, or one that names none (0,
    /// tests). The same generation again (every request between reloads)
    /// changes, and copies, nothing.
    mutating func takes(_ offered: UInt64) -> Bool {
        guard offered > generation || offered == 0 || !adopted else { return false }
        adopted = true
        generation = offered
        return true
    }
}
