import Logging
import NIOConcurrencyHelpers
import NIOCore
import Verifier

/// A route's DeviceCheck work for one request (risk.md §3): the first-use
/// claim of the token's hash in the store and Apple's `validate` or `query`,
/// started together as soon as the head is in, folded into one
/// `DeviceSignal`. One per worker, loop-confined; the Apple client is shared.
final class DeviceCheckService {
    /// How long a spent token's hash is kept: longer than Apple accepts a
    /// token for (risk.md §3: 10 minutes).
    static let spentFor: TimeAmount = .minutes(10)

    private let eventLoop: EventLoop
    private let client: DeviceCheckClient
    private let claim: (_ hash: [UInt8]) -> EventLoopFuture<Bool>
    private let enqueue: (DeviceBitUpdate) -> EventLoopFuture<Bool>
    private let defaultEnvironment: AppEnvironment
    private let metrics: DeviceCheckMetrics?
    private let logger: Logger
    private let complaints: DeviceCheckComplaints

    /// Calls to Apple in flight from this worker; past `maxInFlight` a call
    /// fails at once (a slow or blackholed Apple would otherwise hold a
    /// socket per request for the whole `deviceCheck.timeout`).
    private var inFlight = 0
    static let maxInFlight = 256
    /// After Apple answers 429 the worker stops calling it for a while,
    /// doubling while the 429s go on (250 ms to 30 s): the requests of that
    /// time are answered as throttled without adding to Apple's count.
    private var quietUntil: NIODeadline?
    private var throttledInARow = 0
    static let firstQuiet = TimeAmount.milliseconds(250)
    static let longestQuiet = TimeAmount.seconds(30)

    /// `claim`: true when the hash was not yet spent (`Store.claimDeviceToken`);
    /// `enqueue`: `Store.enqueueDeviceBitUpdate`.
    init(
        eventLoop: EventLoop, client: DeviceCheckClient, defaultEnvironment: AppEnvironment,
        claim: @escaping (_ hash: [UInt8]) -> EventLoopFuture<Bool>,
        enqueue: @escaping (DeviceBitUpdate) -> EventLoopFuture<Bool>, metrics: DeviceCheckMetrics?, logger: Logger,
        complaints: DeviceCheckComplaints
    ) {
        self.eventLoop = eventLoop
        self.client = client
        self.defaultEnvironment = defaultEnvironment
        self.claim = claim
        self.enqueue = enqueue
        self.metrics = metrics
        self.logger = logger
        self.complaints = complaints
    }

    /// The token of `request` (the `deviceToken` header), or nil.
    static func token(of request: ProxyRequest) -> String? {
        let name = request.snapshot.config.attestation.headers.deviceToken
        guard let value = request.headers.first(name: name), !value.isEmpty else { return nil }
        return value
    }

    /// `environment`: the stored environment of the key the request names
    /// (nil: unknown, `deviceCheck.environment` applies); the call starts
    /// when it is known (risk.md §6.3).
    func check(
        _ request: ProxyRequest, mode: DeviceCheckMode, environment: EventLoopFuture<AppEnvironment?>
    ) -> EventLoopFuture<DeviceCheckOutcome> {
        guard mode != .none else { return eventLoop.makeSucceededFuture(DeviceCheckOutcome(signal: .missing)) }
        guard let presented = Self.token(of: request) else {
            metrics?.calls(mode.rawValue, "no-token").inc()
            return eventLoop.makeSucceededFuture(DeviceCheckOutcome(signal: .missing))
        }
        // One token, one spelling: without its padding, with other pad bits
        // or in the URL alphabet, the same bytes would hash as a new token
        // (and a lenient decoder at Apple take it): the first-use record and
        // Apple see the canonical standard base64 (Apple's own spelling, so
        // records made before keep their keys). Not base64: refused here.
        guard let bytes = try? Base64.decode(presented, maxLength: DeviceCheckRequestBody.maxDeviceTokenLength),
            !bytes.isEmpty
        else {
            metrics?.calls(mode.rawValue, "invalid-token").inc()
            return eventLoop.makeSucceededFuture(DeviceCheckOutcome(signal: .invalid))
        }
        let token = Base64.encode(bytes)
        // Spent on first presentation, whatever Apple answers (risk.md §6.9).
        let firstUse = claim(SHA256.hash(Array(token.utf8))).hop(to: eventLoop)
        let started = NIODeadline.now()
        let loop = eventLoop
        let fallback = defaultEnvironment
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let answer = environment.hop(to: loop).flatMap { env -> EventLoopFuture<(DeviceCheckResult, AppEnvironment)> in
            let env = env ?? fallback
            return bound.value.ask(mode, token: token, environment: env).map { ($0, env) }
        }
        return firstUse.and(answer).map { first, answered in
            let me = bound.value
            let (result, env) = answered
            me.metrics?.duration(mode.rawValue).observe(elapsedNanoseconds: (NIODeadline.now() - started).nanoseconds)
            guard first else {
                me.metrics?.calls(mode.rawValue, "reused").inc()
                return DeviceCheckOutcome(signal: .reused)
            }
            me.metrics?.calls(mode.rawValue, result.metricLabel).inc()
            let signal = me.signal(of: result)
            // A token Apple accepted may carry a bit update back (risk.md §3).
            let usable: (token: String, environment: AppEnvironment)? = signal.isValid ? (token, env) : nil
            return DeviceCheckOutcome(signal: signal, acceptedToken: usable)
        }.recover { _ in
            // The claim could not be made (the store): first use is unknown.
            bound.value.metrics?.calls(mode.rawValue, "failed").inc()
            return DeviceCheckOutcome(signal: .unavailable)
        }
    }

    /// Apple's answer, unless this worker is holding off (a 429 lately) or
    /// has too many calls out; then the answer is made here.
    private func ask(_ mode: DeviceCheckMode, token: String, environment: AppEnvironment) -> EventLoopFuture<DeviceCheckResult> {
        let now = NIODeadline.now()
        if let quietUntil, now < quietUntil { return eventLoop.makeSucceededFuture(.throttled) }
        guard inFlight < Self.maxInFlight else {
            complaints.once("busy") {
                logger.warning(
                    "DeviceCheck: \(Self.maxInFlight) calls to Apple in flight on one worker; further calls fail until some return (logged once)")
            }
            return eventLoop.makeSucceededFuture(.failed("too many calls in flight"))
        }
        inFlight += 1
        let call =
            mode == .query
            ? client.query(deviceToken: token, environment: environment, on: eventLoop)
            : client.validate(deviceToken: token, environment: environment, on: eventLoop)
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        return call.hop(to: eventLoop)
            .always { _ in bound.value.inFlight -= 1 }
            .map { result in
                bound.value.heard(result)
                return result
            }
    }

    private func heard(_ result: DeviceCheckResult) {
        switch result {
        case .throttled:
            throttledInARow += 1
            quietUntil =
                NIODeadline.now()
                + ExponentialBackoff.delay(first: Self.firstQuiet, longest: Self.longestQuiet, failures: throttledInARow)
        case .failed:
            break  // no word from Apple either way
        default:
            throttledInARow = 0
        }
    }

    /// An upstream's `Set-Device-Bits` (already parsed), queued durably for
    /// the update worker. nil: nothing to wait for (no token Apple accepted in
    /// this request: dropped and counted). The future never fails: a store
    /// that cannot take the update is logged and counted, and the response
    /// goes on.
    func queue(_ bits: SetDeviceBits, accepted: (token: String, environment: AppEnvironment)?) -> EventLoopFuture<Void>? {
        guard let accepted else {
            metrics?.calls("update", "no-token").inc()
            return nil
        }
        let update = DeviceBitUpdate(
            deviceToken: accepted.token, environment: accepted.environment, bit0: bits.bit0, bit1: bits.bit1,
            enqueuedAt: UnixClock.nowMillis())
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        return enqueue(update).hop(to: eventLoop).map { queued in
            guard !queued else { return }
            let me = bound.value
            me.metrics?.calls("update", "queue-full").inc()
            me.complaints.once("queueFull") {
                me.logger.error(
                    "the DeviceCheck bit-update queue is full (deviceCheck.maxQueuedUpdates): updates are dropped until Apple takes some (logged once; counted as result=queue-full)")
            }
        }.recover { error in
            let me = bound.value
            me.metrics?.calls("update", "failed").inc()
            me.logger.error("a device bit update could not be queued; it is lost", metadata: ["error": "\(error)"])
        }
    }

    /// A `Set-Device-Bits` value that is not `bit0=<0|1>`/`bit1=<0|1>`.
    func malformedUpdate() {
        metrics?.calls("update", "malformed").inc()
        complaints.once("malformedUpdate") {
            logger.warning(
                "an upstream answered a malformed <prefix>Set-Device-Bits (expected bit0=<0|1> and/or bit1=<0|1>, comma-separated); no update was made (logged once)")
        }
    }

    private func signal(of result: DeviceCheckResult) -> DeviceSignal {
        switch result {
        case .valid: return .valid(bits: nil)
        case .bits(let b): return .valid(bits: .set(bit0: b.bit0, bit1: b.bit1, updated: b.lastUpdate))
        case .unset: return .valid(bits: .unset)
        case .updated: return .valid(bits: nil)
        case .invalidToken: return .invalid
        case .badRequest(let why):
            // Apple refused the request itself: the gateway's fault, not the device's.
            complaints.once("badRequest") {
                logger.error(
                    "DeviceCheck refused the gateway's request (400); this is a gateway bug",
                    metadata: ["detail": "\(why)"])
            }
            return .unavailable
        case .unauthorized(let status, let reason):
            complaints.keyRefused(status: status, reason: reason, logger: logger)
            return .unavailable
        case .throttled, .failed: return .unavailable
        }
    }
}

/// What a request's DeviceCheck work came to.
struct DeviceCheckOutcome {
    var signal: DeviceSignal
    /// The token and the environment whose host accepted it: a bit update
    /// taken off the response goes there (risk.md §6.3).
    var acceptedToken: (token: String, environment: AppEnvironment)? = nil
}

extension DeviceSignal {
    var isValid: Bool {
        if case .valid = self { return true }
        return false
    }
}

/// Errors that name the configuration are logged once per process and kind,
/// not once per request (like the receipt refresher's).
final class DeviceCheckComplaints: Sendable {
    private let said = NIOLockedValueBox<Set<String>>([])
    init() {}
    func once(_ kind: String, _ say: () -> Void) {
        let first = said.withLockedValue { $0.insert(kind).inserted }
        if first { say() }
    }

    /// Apple refused the gateway's key (401/403), on a request's call or an
    /// update's: the settings to check, once.
    func keyRefused(status: Int, reason: String, logger: Logger) {
        once("unauthorized") {
            logger.error(
                "DeviceCheck refused the gateway's key: check deviceCheck.teamId, deviceCheck.keyId and deviceCheck.privateKey (a .p8 key with DeviceCheck enabled), and the environment's base URL",
                metadata: ["status": "\(status)", "detail": "\(reason)"])
        }
    }
}

/// `assertgate_devicecheck_calls_total{call, result}` and the call latency.
struct DeviceCheckMetrics {
    let family: MetricFamilyOf<Counter>
    let latency: MetricFamilyOf<Histogram>

    /// `call`: validate, query or update.
    func calls(_ call: String, _ result: String) -> Counter { family.labels(call, result) }
    func duration(_ call: String) -> Histogram { latency.labels(call) }
}
