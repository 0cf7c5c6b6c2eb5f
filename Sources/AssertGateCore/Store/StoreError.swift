/// Failures of the state store. Every case means "the store could not give an
/// answer": the gateway maps all of them to `store-unavailable` (503) or to
/// the route's `onStoreError`. Refusals that ARE answers (counter-replay,
/// unknown-key, ...) are never errors: they come back as `ReasonToken`s.
public enum StoreError: Error, Sendable, Equatable {
    public enum UnavailableReason: Sendable, Equatable {
        /// No connection to Redis at the moment (down, or reconnecting with backoff).
        case notConnected
        /// The connection dropped while the command was in flight.
        case connectionLost
        /// No reply within `commandTimeout`.
        case timeout
        /// TCP connect, AUTH, SELECT or SCRIPT LOAD failed.
        case connectFailed(String)
        /// The server sent bytes we refuse to parse (over limits or malformed).
        case protocolViolation(String)
        /// The client was shut down.
        case shutdown
        /// Too many commands queued while a connection is being set up.
        case overloaded
    }

    case unavailable(UnavailableReason)
    /// Redis answered with an error reply we did not expect (e.g. a script bug, OOM).
    case serverError(String)
    /// Redis answered with a shape the script contract does not allow.
    case unexpectedReply(String)
    /// The caller passed something the store cannot hold (e.g. a keyId that is not 32 bytes).
    case invalidArgument(String)
}

extension StoreError: CustomStringConvertible {
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
            }
        case .serverError(let text): return "server error: \(text)"
        case .unexpectedReply(let text): return "unexpected reply: \(text)"
        case .invalidArgument(let text): return "invalid argument: \(text)"
        }
    }
}
