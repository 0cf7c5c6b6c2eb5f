import Verifier

/// Folds DeviceCheck's answer into the gate's decision (risk.md §2 `deviceBits`,
/// §3 fallback, §6): pure, so every combination is a unit test.
enum DevicePolicy {
    /// `asserted`: the request carried the key id or the assertion header
    /// (risk.md §6.17): it is judged by its assertion alone, the device
    /// token only feeds `deviceBits`.
    /// `observe` sees the `deviceBits` rules evaluated (`assertgate_rule_results_total`).
    static func decide(
        _ decision: GateDecision, asserted: Bool, device: DeviceSignal, route: RouteConfig,
        observe: (RuleKey, RuleResult) -> Void = { _, _ in }
    ) -> GateDecision {
        if !asserted, route.fallback == .device {
            switch device {
            case .missing: return decision  // the gate's own answer to a request without assertion
            case .invalid: return fail(.invalidDeviceToken, route)
            case .reused: return fail(.deviceTokenReused, route)
            case .unavailable: return unavailable(route)
            case .valid: return withBits(flags: [], device: device, route, observe) { .device(flags: $0) }
            }
        }
        // Bits rules act on a verified assertion only (risk.md §2: after the commit).
        guard case .forward(.verified(let identity)) = decision else { return decision }
        return withBits(flags: identity.flags, device: device, route, observe) { flags in
            var id = identity
            id.flags = flags
            return .verified(id)
        }
    }

    /// The route's `deviceBits` rules, require then flag (the last key of the
    /// table, so a flag is appended after the gate's).
    private static func withBits(
        flags: [ReasonToken], device: DeviceSignal, _ route: RouteConfig, _ observe: (RuleKey, RuleResult) -> Void,
        _ outcome: ([ReasonToken]) -> TrustOutcome
    ) -> GateDecision {
        if let rule = route.rules.require.deviceBits {
            if let reason = failure(of: rule, device) {
                observe(.deviceBits, .reject)
                return reason == .devicecheckUnavailable ? unavailable(route) : fail(reason, route)
            }
            observe(.deviceBits, .pass)
        }
        var flags = flags
        if let rule = route.rules.flag.deviceBits {
            if let reason = failure(of: rule, device) {
                observe(.deviceBits, .flag)
                flags.append(reason)
            } else {
                observe(.deviceBits, .pass)
            }
        }
        return .forward(outcome(flags))
    }

    /// Why `device` fails `rule`, nil when it passes. The token's problem
    /// comes before the bits (risk.md §6.5); unset bits are both false.
    static func failure(of rule: DeviceBitsRule, _ device: DeviceSignal) -> ReasonToken? {
        switch device {
        case .missing: return .missingDeviceToken
        case .invalid: return .invalidDeviceToken
        case .reused: return .deviceTokenReused
        case .unavailable: return .devicecheckUnavailable
        case .valid(let bits):
            let state = bits ?? .unset
            if let want = rule.bit0, want != state.bit0 { return .deviceBitsNotAllowed }
            if let want = rule.bit1, want != state.bit1 { return .deviceBitsNotAllowed }
            return nil
        }
    }

    /// A failed device check: refused in `enforce`, forwarded as invalid in `monitor`.
    private static func fail(_ reason: ReasonToken, _ route: RouteConfig) -> GateDecision {
        route.mode == .enforce ? .reject(Rejection(reason)) : .forward(.invalid(reason))
    }

    /// DeviceCheck could not answer and the decision needs it: `onDeviceCheckError`.
    private static func unavailable(_ route: RouteConfig) -> GateDecision {
        switch route.onDeviceCheckError {
        case .reject: return .reject(Rejection(.devicecheckUnavailable, "Apple's DeviceCheck did not answer"))
        case .forward: return .forward(.unavailable(.devicecheckUnavailable))
        }
    }
}
