/// Why the Redis client could not deliver a reply. Error replies the caller
/// asked for arrive as `RESPValue.error`, not as this; these are failures to
/// get any answer (and the few replies the client itself must understand:
/// `SCRIPT LOAD`, `CLUSTER SLOTS`, `PING`). The gateway's store passes them
/// on; every one means "the store could not give an answer".
public enum RedisError: Error, Sendable, Equatable {
    public enum UnavailableReason: Sendable, Equatable {
        /// No connection to Redis at the moment (down, or reconnecting with backoff).
        case notConnected
        /// The connection dropped while the command was in flight.
        case connectionLost
        /// No reply within `commandTimeout`.
        case timeout
        /// TCP connect, TLS, AUTH, SELECT or SCRIPT LOAD failed.
        case connectFailed(String)
        /// The server sent bytes we refuse to parse (over limits or malformed).
        case protocolViolation(String)
        /// The client was shut down.
        case shutdown
        /// Too many commands queued while a connection is being set up.
        case overloaded
        /// The server answered `READONLY`/`MASTERDOWN`: it is a replica now.
        case notPrimary
    }

    case unavailable(UnavailableReason)
    /// Redis answered with an error reply the client did not expect (a
    /// failed `SCRIPT LOAD`, a cluster without a master for a slot).
    case serverError(String)
    /// Redis answered with a shape the client cannot use (`CLUSTER SLOTS`, `PING`).
    case unexpectedReply(String)

    /// An error reply becomes `serverError` (its text is Redis' own and holds
    /// no request data); any other shape `unexpectedReply`.
    static func unexpected(_ reply: RESPValue, _ what: String) -> RedisError {
        if case .error(let message) = reply { return .serverError("\(what): \(message)") }
        return .unexpectedReply(what)
    }
}

extension RedisError: CustomStringConvertible {
    /// One line for logs; carries no key material (reasons come from the
    /// client, OpenSSL or Redis' own error text).
    public var description: String {
        switch self {
        case .unavailable(let reason):
            switch reason {
            case .notConnected: return "not connected"
            case .connectionLost: return "connection lost"
            case .timeout: return "command timed out"
            case .connectFailed(let why): return "connect failed: \(why)"
            case .protocolViolation(let why): return "protocol violation: \(why)"
            case .shutdown: return "client shut down"
            case .overloaded: return "too many commands queued while connecting"
            case .notPrimary: return "the server is a read-only replica (a failover?)"
            }
        case .serverError(let text): return "server error: \(text)"
        case .unexpectedReply(let text): return "unexpected reply: \(text)"
        }
    }
}
