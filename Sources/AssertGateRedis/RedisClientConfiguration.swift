import GatewayTLS
import Logging
import NIOCore

/// Everything a `RedisClient` needs (the gateway resolves it from its
/// `store.redis` config).
public struct RedisClientConfiguration: Sendable {
    public var url: RedisURL
    public var connectTimeout: TimeAmount
    public var commandTimeout: TimeAmount
    /// Connections this client (one event loop) keeps open.
    public var connections: Int
    public var limits: RESPLimits
    /// First reconnect delay; doubles per failed attempt up to `backoffMax`.
    public var backoffBase: TimeAmount = .milliseconds(25)
    public var backoffMax: TimeAmount = .seconds(1)
    /// Commands held per connection while a connect attempt is in flight
    /// (at most `connectTimeout`); more fail at once with `.overloaded`.
    public var maxQueuedWhileConnecting: Int = 4096
    /// `rediss://`: every connection runs TLS with this context, verifying
    /// the server against `tlsServerName` (default: the URL's host).
    public var tls: TLSClientContext?
    public var tlsServerName: String?
    /// Seed nodes of a Redis Cluster (empty: `url` is one server). Every
    /// node gets `url`'s credentials and scheme.
    public var clusterSeeds: [RedisNodeAddress] = []
    /// Where a cluster client reports redirects and map reads (nil: nowhere).
    public var clusterObserver: (any RedisClusterObserver)?
    /// Where connection failures, losses and recoveries are reported (nil: nowhere).
    public var logger: Logger?

    public init(
        url: RedisURL, connectTimeout: TimeAmount = .seconds(1),
        commandTimeout: TimeAmount = .milliseconds(250), connections: Int = 1,
        limits: RESPLimits = .default
    ) {
        self.url = url
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.connections = max(1, connections)
        self.limits = limits
    }

    /// The name a `rediss://` server's certificate must carry.
    var serverNameForTLS: String { tlsServerName ?? url.host }
}
