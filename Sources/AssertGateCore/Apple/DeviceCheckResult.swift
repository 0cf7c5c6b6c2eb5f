/// What one DeviceCheck call came to. Every answer of Apple's, and every way
/// of getting none, has its case, so a caller never guesses from a nil.
enum DeviceCheckResult: Sendable, Equatable {
    /// `validate_device_token` answered 200: a genuine device's token.
    case valid
    /// `query_two_bits` answered 200 with the bits object.
    case bits(DeviceCheckBits)
    /// `query_two_bits` answered 200 with anything else (Apple writes plain
    /// text such as "Failed to find bit state"): the bits were never set.
    case unset
    /// `update_two_bits` answered 200: Apple stored the bits.
    case updated
    /// 400 naming the device token (or a token the client would not send):
    /// not a genuine device's token, or a damaged one.
    case invalidToken(String)
    /// Any other 400: the request was malformed, the caller's bug.
    case badRequest(String)
    /// 401 or 403, or a 400 about the `Authorization` token: the team id,
    /// key id or key is wrong (or the key lacks DeviceCheck).
    case unauthorized(status: Int, reason: String)
    /// 429: Apple throttles this team.
    case throttled
    /// 5xx, another status, no answer in time, an answer too large, no
    /// connection.
    case failed(String)

    /// The `result` label of `assertgate_devicecheck_calls_total`.
    var metricLabel: String {
        switch self {
        case .valid, .bits, .updated: return "ok"
        case .unset: return "unset"
        case .invalidToken: return "invalid-token"
        case .badRequest: return "failed"
        case .unauthorized: return "unauthorized"
        case .throttled: return "throttled"
        case .failed: return "failed"
        }
    }
}
