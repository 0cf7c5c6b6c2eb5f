import GatewayTLS
import Logging
import NIOCore

/// Everything a `RedisClient` needs, resolved from `RedisConfig`.
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
    /// Where a cluster client counts redirects and map reads (nil: nowhere).
    public var clusterMetrics: RedisClusterMetrics?
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

    /// Throws `ValueParseError` for a bad URL, `TLSConfigurationError` when
    /// the TLS files of a `rediss://` store cannot be loaded.
    public init(_ config: RedisConfig) throws {
        let seeds = try config.cluster.map { text throws(ValueParseError) in try RedisURL(parsing: text) }
        self.init(
            url: try seeds.first ?? RedisURL(parsing: config.url), connectTimeout: config.connectTimeout,
            commandTimeout: config.commandTimeout, connections: config.connectionsPerWorker)
        self.clusterSeeds = seeds.map { RedisNodeAddress(host: $0.host, port: $0.port) }
        if url.tls {
            let files = config.tls ?? ClientTLSConfig()
            self.tls = try TLSClientContext(
                caFile: files.caFile, certificatePath: files.certificate, privateKeyPath: files.privateKey)
            self.tlsServerName = files.serverName
        }
    }

    /// The name a `rediss://` server's certificate must carry.
    var serverNameForTLS: String { tlsServerName ?? url.host }
}
