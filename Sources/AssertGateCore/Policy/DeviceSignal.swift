/// What DeviceCheck said of a request's device token (risk.md §3), as the
/// upstream reads it in `<prefix>Device` and `<prefix>Device-Bits`.
public enum DeviceSignal: Sendable, Equatable {
    /// Apple accepted the token, and this was its first use. `bits`: what a
    /// query read (nil after `validate`).
    case valid(bits: DeviceBitsState?)
    /// Apple refused the token (or it is not a token at all).
    case invalid
    /// The route uses DeviceCheck and the request carried no token.
    case missing
    /// The token was presented before (within 10 minutes): a replay.
    case reused
    /// Apple could not answer (unreachable, slow, 429, 5xx, our key refused).
    case unavailable

    public var headerValue: String {
        switch self {
        case .valid: return "valid"
        case .invalid: return "invalid"
        case .missing: return "missing"
        case .reused: return "reused"
        case .unavailable: return "unavailable"
        }
    }

    /// `bit0=<0|1>, bit1=<0|1>, updated=<YYYY-MM>` or `unset`; only with `valid` after a query.
    public var bitsHeaderValue: String? {
        guard case .valid(let bits?) = self else { return nil }
        switch bits {
        case .unset: return "unset"
        case .set(let bit0, let bit1, let updated):
            var text = "bit0=\(bit0 ? 1 : 0), bit1=\(bit1 ? 1 : 0)"
            if let updated { text += ", updated=\(updated)" }
            return text
        }
    }
}

/// The two bits of a device as a query read them.
public enum DeviceBitsState: Sendable, Equatable {
    /// Never set for this device (Apple answers 200 with a text, not the bits).
    case unset
    /// `updated`: the month Apple last stored them, `YYYY-MM`.
    case set(bit0: Bool, bit1: Bool, updated: String?)

    /// An unset state counts as both bits false (risk.md §2).
    public var bit0: Bool {
        if case .set(let b, _, _) = self { return b }
        return false
    }
    public var bit1: Bool {
        if case .set(_, let b, _) = self { return b }
        return false
    }
}
