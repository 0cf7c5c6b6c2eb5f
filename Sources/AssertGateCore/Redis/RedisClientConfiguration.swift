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

    public init(_ config: RedisConfig) throws(ValueParseError) {
        self.init(
            url: try RedisURL(parsing: config.url), connectTimeout: config.connectTimeout,
            commandTimeout: config.commandTimeout, connections: config.connectionsPerWorker)
    }
}
