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
