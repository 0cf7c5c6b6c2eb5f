import GatewayTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix


/// The HTTP/1.1 keep-alive pools of one worker (one event loop), one per
/// upstream and endpoint: two upstreams at one address keep their own
/// connections, limits and TLS settings (another `serverName`, CA or client
/// certificate must never ride on a connection verified for the other).
/// Loop-confined: no locks, every call on `eventLoop`.
final class UpstreamPool {
    let eventLoop: EventLoop
    let logger: Logger
    private struct PoolKey: Hashable {
        var upstream: String
        var endpoint: UpstreamEndpoint
    }
    private var endpoints: [PoolKey: EndpointPool] = [:]
    /// `h2c://`/`h2://` endpoints: multiplexed connections.
    private var h2Endpoints: [PoolKey: H2EndpointPool] = [:]
    private var roundRobin: [String: Int] = [:]
    private var sweepTask: RepeatedTask?
    private var isShutDown = false
    /// Shared by every worker's pool: which upstreams have had no free
    /// connection for longer than their response timeout (`/readyz`).
    let health: UpstreamHealth

    init(eventLoop: EventLoop, logger: Logger, health: UpstreamHealth = UpstreamHealth()) {
        self.eventLoop = eventLoop
        self.logger = logger
        self.health = health
    }

    func startSweeping() {
        let loopBound = NIOLoopBound(self, eventLoop: eventLoop)
        sweepTask = eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { _ in
            loopBound.value.sweep()
        }
    }

    /// Closes idle connections and stops the sweep (in-flight exchanges finish).
    func shutdown() {
        isShutDown = true
        sweepTask?.cancel()
        sweepTask = nil
        for pool in endpoints.values { pool.closeIdle(olderThan: nil) }
        for pool in h2Endpoints.values { pool.closeIdle() }
    }

    /// The pools `endpointPool`/`h2EndpointPool` found last: requests mostly
    /// go to the same one, and comparing the name and endpoint costs less
    /// than hashing them. Cleared whenever the sweep forgets pools.
    private var lastPool: (upstream: String, endpoint: UpstreamEndpoint, pool: EndpointPool)?
    private var lastH2Pool: (upstream: String, endpoint: UpstreamEndpoint, pool: H2EndpointPool)?

    func endpointPool(upstream: String, _ endpoint: UpstreamEndpoint) -> EndpointPool {
        if let last = lastPool, last.endpoint == endpoint, last.upstream == upstream { return last.pool }
        let p = Self.find(PoolKey(upstream: upstream, endpoint: endpoint), in: &endpoints) { EndpointPool(endpoint: endpoint, pool: self) }
        lastPool = (upstream, endpoint, p)
        return p
    }

    func h2EndpointPool(upstream: String, _ endpoint: UpstreamEndpoint) -> H2EndpointPool {
        if let last = lastH2Pool, last.endpoint == endpoint, last.upstream == upstream { return last.pool }
        let p = Self.find(PoolKey(upstream: upstream, endpoint: endpoint), in: &h2Endpoints) { H2EndpointPool(endpoint: endpoint, pool: self) }
        lastH2Pool = (upstream, endpoint, p)
        return p
    }

    private static func find<P>(_ key: PoolKey, in pools: inout [PoolKey: P], orMake make: () -> P) -> P {
        if let found = pools[key] { return found }
        let p = make()
        pools[key] = p
        return p
    }

    /// Round robin over the upstream's endpoints, skipping ejected ones (unless all are).
    func pickEndpoint(name: String, config: UpstreamConfig, now: NIODeadline) -> EndpointPool? {
        pick(name, config.endpoints, pool: { endpointPool(upstream: name, $0) }, ejected: { $0.isEjected(now: now) })
    }

    /// The same, over an HTTP/2 upstream's endpoints.
    private func pickH2Endpoint(name: String, config: UpstreamConfig, now: NIODeadline) -> H2EndpointPool? {
        pick(name, config.endpoints, pool: { h2EndpointPool(upstream: name, $0) }, ejected: { $0.isEjected(now: now) })
    }

    /// The next endpoint's pool in turn that is not ejected (the turn's own
    /// when all are).
    private func pick<P>(
        _ name: String, _ eps: [UpstreamEndpoint], pool: (UpstreamEndpoint) -> P, ejected: (P) -> Bool
    ) -> P? {
        guard !eps.isEmpty else { return nil }
        if eps.count == 1 {
            // Nothing to rotate: the one endpoint, ejected or not (as the loop below would pick).
            let p = pool(eps[0])
            _ = ejected(p)  // clears an ejection that has run out
            return p
        }
        let start = roundRobin[name, default: 0]
        roundRobin[name] = start &+ 1
        for i in 0..<eps.count {
            let p = pool(eps[(start &+ i) % eps.count])
            if !ejected(p) { return p }
        }
        return pool(eps[start % eps.count])
    }

    /// `upstream`: the request's snapshot's (its TLS and generation too: an
    /// endpoint pool keeps the newest configuration it was leased with).
    /// Read through the class, the configuration is never copied per request.
    /// `client`: the downstream client's address, for `maxConnectionsPerClient`.
    func lease(
        name: String, upstream: ResolvedUpstream, client: String? = nil, responseTimeout: TimeAmount? = nil,
        delegate: UpstreamExchangeDelegate
    ) {
        guard !upstream.config.endpoints.isEmpty else {
            delegate.upstreamLeaseFailed(.noEndpoints)
            return
        }
        let now = NIODeadline.now()
        let timeout = responseTimeout ?? upstream.config.responseTimeout
        // Neither pick is nil: there is an endpoint.
        if upstream.config.isHTTP2 {
            pickH2Endpoint(name: name, config: upstream.config, now: now)?.lease(
                config: upstream.config, generation: upstream.generation, tls: upstream.tls, client: client,
                responseTimeout: timeout, delegate: delegate, now: now)
        } else {
            pickEndpoint(name: name, config: upstream.config, now: now)?.lease(
                config: upstream.config, generation: upstream.generation, tls: upstream.tls, client: client,
                responseTimeout: timeout, delegate: delegate, now: now)
        }
    }

    /// The same for tests that have no snapshot (`generation` 0: always adopted).
    func lease(
        name: String, config: UpstreamConfig, generation: UInt64 = 0, tls: UpstreamTLS?, client: String? = nil,
        responseTimeout: TimeAmount? = nil, delegate: UpstreamExchangeDelegate
    ) {
        lease(
            name: name, upstream: ResolvedUpstream(config: config, tls: tls, generation: generation), client: client,
            responseTimeout: responseTimeout, delegate: delegate)
    }

    /// Requests waiting in this worker's endpoint pools (tests).
    var waiterCount: Int {
        endpoints.values.reduce(0) { $0 + $1.waiterCount } + h2Endpoints.values.reduce(0) { $0 + $1.waiterCount }
    }

    /// HTTP/2 connections open to `upstream` on this worker (tests, benchmarks).
    func h2ConnectionCount(upstream: String) -> Int {
        h2Endpoints.filter { $0.key.upstream == upstream }.reduce(0) { $0 + $1.value.connectionCount }
    }

    private func sweep() {
        let now = eventLoop.now
        // Every pool's connections are looked at here, every 100 ms, rather
        // than a list of those in flight kept on every request.
        var timedOut: [UpstreamConnection] = []
        for pool in endpoints.values { pool.collectTimedOut(now: now, into: &timedOut) }
        for c in timedOut { c.responseTimedOut() }
        for (key, pool) in endpoints {
            pool.closeIdle(olderThan: now)
            pool.expireWaiters(now: now)
            pool.checkExhaustion(upstream: key.upstream, now: now)
        }
        // Pools of upstreams a reload removed (or renamed) would otherwise
        // stay for ever; an empty one with nothing to remember is rebuilt
        // for free the next time it is needed.
        endpoints = endpoints.filter { !$0.value.isForgettable }
        lastPool = nil
        for (key, pool) in h2Endpoints {
            pool.sweep(now: now)
            pool.checkExhaustion(upstream: key.upstream, now: now)
        }
        h2Endpoints = h2Endpoints.filter { !$0.value.isForgettable }
        lastH2Pool = nil
    }
}

extension UpstreamPool {
    /// A pool's exhaustion changed: `/readyz` hears of it, and the log when it begins.
    func exhaustionChanged(_ exhausted: Bool, upstream: String, endpoint: UpstreamEndpoint, key: String) {
        health.set(upstream: upstream, pool: key, exhausted: exhausted)
        if exhausted {
            logger.warning("upstream pool exhausted", metadata: ["upstream": "\(upstream)", "endpoint": "\(endpoint)"])
        }
    }
}

/// Which upstream endpoints have been exhausted (every connection busy and
/// requests waiting) for longer than their response timeout, across workers.
/// Written only when a pool's state flips, read by `/readyz`.
public final class UpstreamHealth: Sendable {
    private let exhausted = NIOLockedValueBox<[String: Set<String>]>([:])

    public init() {}

    /// "upstream (endpoint)" for each exhausted pool; empty when all are fine.
    public var exhaustedUpstreams: [String] {
        exhausted.withLockedValue { table in
            table.sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value.sorted().joined(separator: ", ")))" }
        }
    }

    func set(upstream: String, pool: String, exhausted isExhausted: Bool) {
        exhausted.withLockedValue { table in
            if isExhausted {
                table[upstream, default: []].insert(pool)
            } else if var pools = table[upstream] {
                pools.remove(pool)
                table[upstream] = pools.isEmpty ? nil : pools
            }
        }
    }
}

/// Connections to one endpoint within one worker.
final class EndpointPool {
    let endpoint: UpstreamEndpoint
    unowned let pool: UpstreamPool
    private var idle: [UpstreamConnection] = []
    /// Connected ones, idle or busy (for the sweep).
    private var open: [UpstreamConnection] = []
    /// Open plus connecting connections.
    private var total = 0
    private var waiters = CircularBuffer<Waiter>()
    private var ejection = EndpointEjection()
    /// The newest configuration a lease brought (`configGeneration`): what
    /// new connections are made with, and its limits and timeouts.
    private var config: UpstreamConfig?
    private var limits = PoolLimits()
    private var configGeneration = ConfigGeneration()
    /// `https://`: the newest TLS settings a lease brought; new connections
    /// use them. Newer settings (a reload) retire the connections made with
    /// older ones; a lease from a request still on the older configuration
    /// does not switch back.
    private var tls: UpstreamTLS?
    /// A TLS handshake failure is logged once per run of failures.
    private var loggedHandshakeFailure = false

    typealias Waiter = UpstreamWaiter

    /// Connections (leased or connecting) per client address.
    private var shares = ClientShares()
    private var exhaustion: PoolExhaustion

    init(endpoint: UpstreamEndpoint, pool: UpstreamPool) {
        self.endpoint = endpoint
        self.pool = pool
        exhaustion = PoolExhaustion(endpoint: endpoint, pool: pool)
    }

    /// No connection, no waiter, no failure to remember.
    var isForgettable: Bool {
        total == 0 && open.isEmpty && waiters.isEmpty && ejection.isClear && !exhaustion.reported
    }

    func isEjected(now: NIODeadline) -> Bool { ejection.isEjected(now: now) }

    func lease(
        config offered: UpstreamConfig, generation: UInt64, tls: UpstreamTLS?, client: String?,
        responseTimeout: TimeAmount, delegate: UpstreamExchangeDelegate, now: NIODeadline
    ) {
        adopt(offered, generation: generation)
        if let newer = UpstreamTLS.replacing(self.tls, with: tls, on: endpoint) {
            self.tls = newer
            for c in idle { c.close() }  // busy ones close when they come back
        }
        // A client at its share waits for one of its own connections, even
        // when others are free: those are kept for everyone else.
        if shares.count(client) >= limits.perClient {
            enqueue(delegate, client: client, responseTimeout: responseTimeout, now: now)
            return
        }
        if let c = reusableIdle() {
            shares.take(client)
            c.begin(delegate: delegate, client: client, responseTimeout: responseTimeout, idleTimeout: limits.idleTimeout)
            delegate.upstreamLeased(c)
            return
        }
        if total < limits.connections {
            connect(config: self.config ?? offered, client: client, responseTimeout: responseTimeout, delegate: delegate)
        } else {
            // No free connection for this request: the pool is exhausted from now
            // until one is free again (`checkExhaustion`).
            exhaustion.requestWaited(now: now)
            enqueue(delegate, client: client, responseTimeout: responseTimeout, now: now)
        }
    }

    /// Only a newer configuration replaces the pool's (`ConfigGeneration`).
    /// Lowered connection limits close idle connections over them at once,
    /// busy ones when they come back (`release`).
    private func adopt(_ offered: UpstreamConfig, generation: UInt64) {
        guard configGeneration.takes(generation) else { return }
        config = offered
        limits = PoolLimits(offered)
        while total > limits.connections, let c = idle.last { c.close() }
    }

    /// The request waits for a connection: until its response timeout, at
    /// most the upstream's (`UpstreamWaiter`).
    private func enqueue(_ delegate: UpstreamExchangeDelegate, client: String?, responseTimeout: TimeAmount, now: NIODeadline) {
        waiters.append(Waiter(
            delegate: delegate, now: now, client: client, responseTimeout: responseTimeout, upstreamTimeout: limits.responseTimeout))
    }

    /// An idle connection still good for the current TLS settings.
    private func reusableIdle() -> UpstreamConnection? {
        while let c = idle.popLast() {
            // A connection verified under settings a reload replaced (it was
            // busy at the reload) is not reused.
            if !c.isClosed, c.tls?.generation == self.tls?.generation { return c }
            c.close()
        }
        return nil
    }

    private func connect(
        config: UpstreamConfig, client: String?, responseTimeout: TimeAmount, delegate: UpstreamExchangeDelegate
    ) {
        shares.take(client)
        total += 1
        let loop = pool.eventLoop
        // https:// without settings: only a snapshot whose TLS files did not
        // load gets here (serve and reload refuse those). Fail closed, never
        // fall back to cleartext.
        let tls = endpoint.tls ? self.tls : nil
        if endpoint.tls, tls == nil {
            total -= 1
            shares.give(client)
            pool.logger.error("upstream has no TLS context", metadata: ["endpoint": "\(endpoint)"])
            delegate.upstreamLeaseFailed(.connectFailed)
            serveWaiter()
            return
        }
        let serverName = tls?.serverName ?? endpoint.host
        let connectTimeout = config.connectTimeout
        let started = NIODeadline.now()
        // The channel lives on this loop: its initializer hands the handler over here.
        let installed = NIOLoopBoundBox<(tls: OpenSSLHandler?, client: UpstreamClientHandler?)>((nil, nil), eventLoop: loop)
        let future = ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .resolver(HostAddressCache.shared.resolver(on: loop))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    var openSSL: OpenSSLHandler?
                    if let tls {
                        let handler = OpenSSLHandler(client: tls.context, serverName: serverName)
                        try channel.pipeline.syncOperations.addHandler(handler)
                        openSSL = handler
                    }
                    installed.value = (openSSL, try UpstreamClientHandler.install(on: channel.pipeline.syncOperations, tls: openSSL))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel -> EventLoopFuture<Channel> in
                guard tls != nil else { return channel.eventLoop.makeSucceededFuture(channel) }
                return UpstreamTLS.handshake(installed.value.tls, on: channel, deadline: started + connectTimeout).map { channel }
            }
        let bound = NIOLoopBound((self, delegate, tls), eventLoop: loop)
        future.whenComplete { result in
            let (ep, delegate, settings) = bound.value
            ep.connectCompleted(
                result, handler: installed.value.client, config: config, tls: settings, client: client,
                responseTimeout: responseTimeout, delegate: delegate)
        }
    }

    private func connectCompleted(
        _ result: Result<Channel, Error>, handler: UpstreamClientHandler?, config: UpstreamConfig, tls: UpstreamTLS?,
        client: String?, responseTimeout: TimeAmount,
        delegate: UpstreamExchangeDelegate
    ) {
        switch result {
        case .success(let channel):
            ejection.connected()
            loggedHandshakeFailure = false
            guard let handler else {
                total -= 1
                shares.give(client)
                channel.close(promise: nil)
                delegate.upstreamLeaseFailed(.connectFailed)
                serveWaiter()
                return
            }
            let c = UpstreamConnection(channel: channel, endpoint: self, handler: handler, tls: tls)
            c.begin(delegate: delegate, client: client, responseTimeout: responseTimeout, idleTimeout: config.idleTimeout)
            if !channel.isActive {
                c.abandon()
                delegate.upstreamLeaseFailed(.connectFailed)
                return
            }
            delegate.upstreamLeased(c)
        case .failure(let error):
            total -= 1
            shares.give(client)
            ejection.failed(endpoint: endpoint, logger: pool.logger)
            if let failed = error as? TLSClientHandshakeError, !loggedHandshakeFailure {
                // The usual cause is configuration (CA, name, client certificate):
                // say so once, not once per request.
                loggedHandshakeFailure = true
                let reason = failed.timedOut ? "no TLS handshake within \(DurationParser.format(config.connectTimeout))" : failed.reason
                pool.logger.warning("upstream TLS handshake failed", metadata: ["endpoint": "\(endpoint)", "reason": "\(reason)"])
            }
            delegate.upstreamLeaseFailed(UpstreamError(connectFailure: error))
            serveWaiter()
        }
    }

    /// A finished keep-alive connection: hand it to a waiter or park it.
    func release(_ c: UpstreamConnection) {
        shares.give(c.endLease())
        if c.tls?.generation != tls?.generation || c.isClosed || total > limits.connections {
            // Verified under TLS settings a reload has replaced, closed
            // while its last bytes were handed over, or over a limit a
            // reload lowered: closing it lets a waiter connect afresh when
            // there is room (`connectionClosed`).
            c.close()
            return
        }
        if let w = popEligibleWaiter() {
            shares.take(w.client)
            c.begin(delegate: w.delegate, client: w.client, responseTimeout: w.responseTimeout,
                    idleTimeout: limits.idleTimeout)
            w.delegate.upstreamLeased(c)
            return
        }
        c.idleSince = pool.eventLoop.now
        idle.append(c)
    }

    /// Kept-alive connections waiting for an exchange.
    var idleCount: Int { idle.count }

    /// A connection was made (it is counted in `total` since its connect began).
    func connectionOpened(_ c: UpstreamConnection) { open.append(c) }

    func connectionClosed(_ c: UpstreamConnection) {
        total -= 1
        shares.give(c.endLease())
        if let i = idle.firstIndex(where: { $0 === c }) { idle.remove(at: i) }
        if let i = open.firstIndex(where: { $0 === c }) { open.remove(at: i) }
        serveWaiter()
    }

    /// The oldest waiter whose client is under its share (FIFO otherwise);
    /// departed ones at the front are dropped on the way.
    private func popEligibleWaiter() -> Waiter? {
        while let first = waiters.first, first.departed { waiters.removeFirst() }
        guard !waiters.isEmpty else { return nil }
        let cap = limits.perClient
        guard let i = waiters.firstIndex(where: { !$0.departed && shares.count($0.client) < cap }) else { return nil }
        return waiters.remove(at: i)
    }

    private func serveWaiter() {
        guard !waiters.isEmpty, let config, total < limits.connections else { return }
        if let w = popEligibleWaiter() {
            connect(config: config, client: w.client, responseTimeout: w.responseTimeout, delegate: w.delegate)
        }
    }

    /// Called by the sweep: an endpoint whose connections have all been busy,
    /// with requests waiting, for longer than its response timeout is reported
    /// to `/readyz` until it has a free connection again.
    func checkExhaustion(upstream: String, now: NIODeadline) {
        let free = total < limits.connections || !idle.isEmpty
        if let exhausted = exhaustion.check(free: free, now: now, timeout: limits.responseTimeout) {
            pool.exhaustionChanged(exhausted, upstream: upstream, endpoint: endpoint, key: exhaustion.key)
        }
    }

    func closeIdle(olderThan now: NIODeadline?) {
        guard !idle.isEmpty else { return }
        let victims: [UpstreamConnection]
        if let now {
            victims = idle.filter { $0.idleSince + $0.idleTimeout <= now }
        } else {
            victims = idle
        }
        for c in victims { c.close() }
    }

    func expireWaiters(now: NIODeadline) { waiters.failExpired(now: now) }

    var waiterCount: Int { waiters.count }

    /// Sweep: connections whose exchange is overdue or stalled.
    func collectTimedOut(now: NIODeadline, into out: inout [UpstreamConnection]) {
        for c in open where c.isInFlight && c.timedOut(now: now) { out.append(c) }
    }
}
