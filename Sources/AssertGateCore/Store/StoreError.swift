/// Failures of the state store's own making. Refusals that ARE answers
/// (counter-replay, unknown-key, ...) are never errors: they come back as
/// `ReasonToken`s. `RedisStore` also fails with the client's `RedisError`
/// (not connected, timed out, ...), passed on as the client reported it; the
/// gateway maps every store failure to `store-unavailable` (503) or to the
/// route's `onStoreError`.
public enum StoreError: Error, Sendable, Equatable {
    /// Redis answered with an error reply we did not expect (e.g. a script bug, OOM).
    case serverError(String)
    /// Redis answered with a shape the script contract does not allow.
    case unexpectedReply(String)
    /// The caller passed something the store cannot hold (e.g. a keyId that is not 32 bytes).
    case invalidArgument(String)
}

extension StoreError: CustomStringConvertible {
    /// One line for logs; carries no key material (reasons come from Redis'
    /// own error text).
    public var description: String {
        switch self {
        case .serverError(let text): return "server error: \(text)"
        case .unexpectedReply(let text): return "unexpected reply: \(text)"
        case .invalidArgument(let text): return "invalid argument: \(text)"
        }
    }
}
