#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOHTTP1
import Verifier

/// The policy of protocol.md §4–§5 for one worker: checks the assertion of
/// requests on `enforce` and `monitor` routes, in the order the protocol
/// fixes, and turns the outcome into a decision and trust headers.
///
/// Cost on the hot path: header decoding, one SHA-256 of the body, one ECDSA
/// verify with the cached key, and ONE store round trip (the atomic commit).
/// A key-cache miss adds one `loadKey`. The signature is checked before the
/// store is touched, so a forged assertion burns neither counter nor challenge.
public final class AssertionGate: RequestGate {
    private let eventLoop: EventLoop
    private let store: any Store
    private let keys: KeyCache
    private let metrics: GatewayMetrics?
    private let clock: @Sendable () -> Int64
    /// `assertgate_enforcement_duration_seconds` by route mode, resolved once.
    private let enforceDuration: Histogram?
    private let monitorDuration: Histogram?
    private let risk: RiskMetricsCache?

    public init(
        eventLoop: EventLoop, store: any Store, metrics: GatewayMetrics?,
        keyCacheCapacity: Int = 100_000, clock: @escaping @Sendable () -> Int64 = UnixClock.now
    ) {
        self.eventLoop = eventLoop
        self.store = store
        self.metrics = metrics
        self.keys = KeyCache(capacity: keyCacheCapacity)
        self.clock = clock
        self.enforceDuration = metrics?.enforcementDuration.labels(PolicyMode.enforce.rawValue)
        self.monitorDuration = metrics?.enforcementDuration.labels(PolicyMode.monitor.rawValue)
        self.risk = metrics.map(RiskMetricsCache.init)
    }

    /// Records how long the check of a request took and passes its decision on.
    private func timed(_ started: NIODeadline, _ route: RouteConfig, _ decision: GateDecision) -> GateDecision {
        let histogram = route.mode == .monitor ? monitorDuration : enforceDuration
        histogram?.observe(elapsedNanoseconds: (NIODeadline.now() - started).nanoseconds)
        return decision
    }

    public func bodyPolicy(for request: ProxyRequest, route: RouteConfig) -> GateBodyPolicy {
        guard route.mode != .passthrough, route.bindBody else { return .stream }
        // Headers absent or malformed decide the request from its head (enforce:
        // 401/400 at once; monitor: forwarded as missing/invalid, body streamed):
        // no body is buffered for a request that can never verify.
        guard let names = request.snapshot.enforcement?.headerNames,
            (try? AssertionHeaders.parse(
                names: names, challengeRequired: route.challengeRequired, lookup: { request.headers.first(name: $0) })) != nil
        else { return .stream }
        return .buffer(limit: route.maxBodyBytes)
    }

    public func evaluate(_ request: ProxyRequest, route: RouteConfig, body: ByteBuffer?) -> GateOutcome {
        guard let context = request.snapshot.enforcement else {
            // Unreachable through `serve` (it refuses unloadable trust anchors);
            // fail closed rather than forward unchecked.
            return .decided(.reject(Rejection(.storeUnavailable, "no enforcement context")))
        }
        guard route.mode != .passthrough else {
            return .decided(.forward(.none))
        }
        let started = NIODeadline.now()
        // 1. Headers and assertion object.
        let headers: AssertionHeaders
        let parsed: ParsedAssertion
        do throws(Rejection) {
            headers = try AssertionHeaders.parse(
                names: context.headerNames, challengeRequired: route.challengeRequired
            ) { request.headers.first(name: $0) }
        } catch {
            return .decided(timed(started, route, fail(error, route)))
        }
        do throws(VerificationError) {
            parsed = try ParsedAssertion.parse(headers.assertion)
        } catch {
            return .decided(timed(started, route, fail(Rejection(error), route)))
        }
        let bodyHash: String
        if route.bindBody, let body {
            bodyHash = body.withUnsafeReadableBytes { Hex.encode(SHA256.hash($0)) }
        } else if route.bindBody {
            bodyHash = Hex.encode(SHA256.hash([]))
        } else {
            bodyHash = ClientData.unsignedPayload
        }
        let clientDataHash = SHA256.hash(
            ClientData.assert(
                method: request.method, path: request.target, challenge: headers.challenge, bodyHash: bodyHash))

        // 2. The key: from the worker cache, else one load from the store.
        if let entry = keys.get(headers.keyId) {
            return .pending(verifyAndCommit(entry, parsed, headers, clientDataHash, request, route, context, started))
        }
        // Every continuation runs on this worker's loop (the gate is loop-confined).
        let loaded = load(headers.keyId).assumeIsolated()
        let decision = loaded.flatMap { stored -> EventLoopFuture<GateDecision> in
            guard let stored else {
                return self.eventLoop.makeSucceededFuture(
                    self.timed(started, route, self.fail(Rejection(.unknownKey, "no key stored under this id"), route)))
            }
            // DeviceCheck's host lookup may have cached it from the same load.
            guard let entry = self.keys.get(headers.keyId) ?? self.cache(stored, headers.keyId) else {
                // A stored key that does not parse cannot verify anything.
                return self.eventLoop.makeSucceededFuture(
                    self.timed(started, route, self.fail(Rejection(.unknownKey, "the stored public key does not parse"), route)))
            }
            return self.verifyAndCommit(entry, parsed, headers, clientDataHash, request, route, context, started)
        }.recover { error in
            // Only the key load fails this future: `verifyAndCommit` always succeeds its own.
            self.timed(started, route, self.storeFailed(error, request, route, context))
        }
        return .pending(decision.nonisolated())
    }

    /// Steps 3–6: signature, App ID, the atomic commit, the risk metric.
    private func verifyAndCommit(
        _ entry: KeyCache.Entry, _ parsed: ParsedAssertion, _ headers: AssertionHeaders, _ clientDataHash: [UInt8],
        _ request: ProxyRequest, _ route: RouteConfig, _ context: EnforcementContext, _ started: NIODeadline
    ) -> EventLoopFuture<GateDecision> {
        do throws(VerificationError) {
            _ = try parsed.verify(
                verifier: entry.verifier, appId: entry.stored.appId, clientDataHash: clientDataHash,
                previousCounter: nil)
        } catch {
            return eventLoop.makeSucceededFuture(timed(started, route, fail(Rejection(error), route)))
        }
        // One promise for the decision; the store calls back on its loop,
        // which is this worker's (no hop, no chain of futures).
        let loop = eventLoop
        let promise = loop.makePromise(of: GateDecision.self)
        let asserted = assertedSignals(parsed.authenticatorData.extensions)
        let bound = NIOLoopBound((self, entry, headers, request, route, context), eventLoop: loop)
        @Sendable func finish(_ outcome: Result<CommitResult, any Error>) {
            let (gate, entry, headers, request, route, context) = bound.value
            switch outcome {
            case .success(let result):
                promise.succeed(
                    gate.timed(started, route, gate.decide(result, entry, asserted, headers, request, route, context)))
            case .failure(let error):
                promise.succeed(gate.timed(started, route, gate.storeFailed(error, request, route, context)))
            }
        }
        store.commitAssertion(keyId: headers.keyId, counter: parsed.counter, challenge: headers.challenge) { outcome in
            // A store of another loop (any Store may be handed in) calls back there.
            if loop.inEventLoop { finish(outcome) } else { loop.execute { finish(outcome) } }
        }
        return promise.futureResult
    }

    /// The signals this request's assertion carried (risk.md §1). A malformed
    /// one counts as absent (the attestation's applies, §6.1) and is counted.
    private func assertedSignals(_ extensions: AuthenticatorExtensions) -> AssertedSignals {
        for key in extensions.malformedKeys { metrics?.malformedExtension(key).inc() }
        return AssertedSignals(appVersion: extensions.bundleVersion, launchCategory: extensions.launchCategory)
    }

    /// Step 6 and the trust headers, from the commit's answer: the always-on
    /// App ID and environment re-check against the configuration in force,
    /// then the app's and the route's rules (risk.md §2), on values in hand.
    private func decide(
        _ result: CommitResult, _ entry: KeyCache.Entry, _ asserted: AssertedSignals, _ headers: AssertionHeaders,
        _ request: ProxyRequest, _ route: RouteConfig, _ context: EnforcementContext
    ) -> GateDecision {
        if let rejection = result.rejection {
            if rejection == .unknownKey { keys.remove(headers.keyId) }
            return fail(Rejection(rejection), route)
        }
        let stored = entry.stored
        guard let app = context.apps[stored.appId], app.environments.contains(stored.environment) else {
            risk?.rules(route: route.upstream).inc(.environments, .reject)
            let reason: ReasonToken = context.apps[stored.appId] == nil ? .appIdMismatch : .environmentNotAllowed
            return fail(Rejection(reason), route)
        }
        let state = result.state
        let signals = RuleSignals(
            environment: stored.environment, appVersion: asserted.appVersion ?? stored.bundleVersion,
            launchCategory: asserted.launchCategory ?? stored.launchCategory, keyPolicy: stored.keyPolicy,
            userKeys: state?.userId == nil ? nil : state?.userKeyCount, riskMetric: state?.riskMetric)
        var flags: [ReasonToken] = []
        let appHasRules = !app.rules.isEmpty
        let routeHasRules = !route.rules.isEmpty
        if appHasRules || routeHasRules {
            let rules =
                !routeHasRules ? app.rules
                : !appHasRules ? route.rules : RulesConfig.effective(app: app.rules, route: route.rules)
            let verdict: RuleVerdict
            if let counters = risk?.rules(route: route.upstream) {
                verdict = RuleEvaluator.evaluate(rules, signals) { counters.inc($0, $1) }
            } else {
                verdict = RuleEvaluator.evaluate(rules, signals)
            }
            if let reason = verdict.rejection { return fail(Rejection(reason), route) }
            flags = verdict.flags
        }
        let now = clock()
        let identity = VerifiedIdentity(
            keyId: headers.keyId, environment: stored.environment.rawValue,
            userId: state?.userId, userKeyCount: signals.userKeys,
            riskMetric: state?.riskMetric,
            riskMetricAgeSeconds: state?.riskMetricAt.map { now - $0 },
            appVersion: signals.appVersion, launchCategory: signals.launchCategory, keyPolicy: signals.keyPolicy,
            flags: flags)
        risk?.verified(route: route.upstream, environment: stored.environment, launchCategory: signals.launchCategory).inc()
        return .forward(.verified(identity))
    }

    /// A `deviceBits` rule evaluated once DeviceCheck answered, in the same
    /// per-route counters as the rules this gate evaluates.
    public func ruleEvaluated(_ key: RuleKey, _ result: RuleResult, route: RouteConfig) {
        risk?.rules(route: route.upstream).inc(key, result)
    }

    /// From the worker's key cache, else one key load that fills it (the
    /// check of the same request then finds the key cached).
    public func keyEnvironment(for request: ProxyRequest) -> EventLoopFuture<AppEnvironment?>? {
        guard let names = request.snapshot.enforcement?.headerNames,
            let text = request.headers.first(name: names.keyId), !text.isEmpty,
            let keyId = try? KeyIdCodec.decode(text, reason: .malformedHeader)
        else { return eventLoop.makeSucceededFuture(nil) }
        if let entry = keys.get(keyId) { return eventLoop.makeSucceededFuture(entry.stored.environment) }
        return load(keyId).assumeIsolated().map { stored -> AppEnvironment? in
            stored.flatMap { self.cache($0, keyId) }?.stored.environment
        }.nonisolated().recover { _ in nil }
    }

    /// A loaded key into the worker's cache; nil when its public key does not parse.
    private func cache(_ stored: StoredKey, _ keyId: [UInt8]) -> KeyCache.Entry? {
        guard let publicKey = try? P256PublicKey(point: stored.publicKey) else { return nil }
        let entry = KeyCache.Entry(stored: stored, publicKey: publicKey)
        keys.put(keyId, entry)
        return entry
    }

    /// One key load per key in flight: DeviceCheck's host lookup and the
    /// check of the same request share it on a cache miss.
    private var loading: [[UInt8]: EventLoopFuture<StoredKey?>] = [:]

    private func load(_ keyId: [UInt8]) -> EventLoopFuture<StoredKey?> {
        if let pending = loading[keyId] { return pending }
        let future = store.loadKey(keyId: keyId).hop(to: eventLoop)
        loading[keyId] = future
        future.assumeIsolated().whenComplete { _ in self.loading[keyId] = nil }
        return future
    }

    /// A failed check: rejected in `enforce`, forwarded with the reason in `monitor`.
    private func fail(_ rejection: Rejection, _ route: RouteConfig) -> GateDecision {
        switch route.mode {
        case .enforce:
            return .reject(rejection)
        case .monitor, .passthrough:
            let reason = rejection.reason
            let outcome: TrustOutcome = reason == .missingAssertion ? .missing(reason) : .invalid(reason)
            return .forward(outcome)
        }
    }

    private func storeFailed(
        _ error: any Error, _ request: ProxyRequest, _ route: RouteConfig, _ context: EnforcementContext
    ) -> GateDecision {
        metrics?.storeErrors.inc()
        switch route.onStoreError {
        case .reject: return .reject(Rejection(.storeUnavailable))
        case .forward: return .forward(.unavailable(.storeUnavailable))
        }
    }
}

public enum UnixClock {
    @Sendable public static func nowMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    @Sendable public static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }
}

/// The values an assertion's own extension map gave (nil = absent or malformed).
struct AssertedSignals: Sendable {
    var appVersion: String?
    var launchCategory: UInt32?
}
