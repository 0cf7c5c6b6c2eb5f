import Logging
import NIOCore

/// Consecutive connect failures that eject an endpoint, and for how long.
let ejectAfterFailures = 3
let ejectCoolDown: TimeAmount = .seconds(10)

/// An endpoint's run of connect failures: after `ejectAfterFailures` in a
/// row it is passed over (while another endpoint is not) for `ejectCoolDown`.
/// One per endpoint pool, whatever the protocol.
struct EndpointEjection {
    private var consecutiveFailures = 0
    private var until: NIODeadline?

    var isClear: Bool { consecutiveFailures == 0 && until == nil }

    /// Clears an ejection that has run out.
    mutating func isEjected(now: NIODeadline) -> Bool {
        guard let u = until else { return false }
        if u <= now {
            until = nil
            return false
        }
        return true
    }

    mutating func connected() {
        consecutiveFailures = 0
        until = nil
    }

    mutating func failed(endpoint: UpstreamEndpoint, logger: Logger) {
        consecutiveFailures += 1
        guard consecutiveFailures >= ejectAfterFailures else { return }
        until = .now() + ejectCoolDown
        logger.warning("upstream endpoint ejected", metadata: ["endpoint": "\(endpoint)", "failures": "\(consecutiveFailures)"])
    }
}
