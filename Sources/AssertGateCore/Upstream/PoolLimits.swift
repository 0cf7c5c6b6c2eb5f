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
