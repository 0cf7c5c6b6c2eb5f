/// The parts of `redis[s]://[user:password@]host[:port][/db]`, for the store.
public struct RedisURL: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var username: String?
    /// Percent-decoded. Never logged (see `description`).
    public var password: String?
    public var database: Int
    /// `rediss://`: the connection is TLS.
    public var tls: Bool

    public init(
        host: String, port: Int = 6379, username: String? = nil, password: String? = nil, database: Int = 0,
        tls: Bool = false
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
    }
}

extension RedisURL: CustomStringConvertible {
    public var description: String {
        let auth = username.map { "\($0):***@" } ?? (password != nil ? ":***@" : "")
        return "\(tls ? "rediss" : "redis")://\(auth)\(RedisNodeAddress(host: host, port: port))/\(database)"
    }
}
