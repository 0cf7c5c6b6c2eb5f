import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// Consecutive connect failures that eject an endpoint, and for how long.
let ejectAfterFailures = 3
let ejectCoolDown: TimeAmount = .seconds(10)

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
    private var roundRobin: [String: Int] = [:]
    /// Connections with an exchange in progress (for the response-timeout sweep).
    private var inflight: [UpstreamConnection] = []
    private var sweepTask: RepeatedTask?
    private var isShutDown = false

    init(eventLoop: EventLoop, logger: Logger) {
        self.eventLoop = eventLoop
        self.logger = logger
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
    }

    func endpointPool(upstream: String, _ endpoint: UpstreamEndpoint) -> EndpointPool {
        let key = PoolKey(upstream: upstream, endpoint: endpoint)
        if let p = endpoints[key] { return p }
        let p = EndpointPool(endpoint: endpoint, pool: self)
        endpoints[key] = p
        return p
    }

    /// Round robin over the upstream's endpoints, skipping ejected ones (unless all are).
    func pickEndpoint(name: String, config: UpstreamConfig, now: NIODeadline) -> EndpointPool? {
        let eps = config.endpoints
        guard !eps.isEmpty else { return nil }
        let start = roundRobin[name, default: 0]
        roundRobin[name] = start &+ 1
        for i in 0..<eps.count {
            let p = endpointPool(upstream: name, eps[(start &+ i) % eps.count])
            if !p.isEjected(now: now) { return p }
        }
        return endpointPool(upstream: name, eps[start % eps.count])
    }

    /// `tls`: how the upstream's `https://` endpoints are reached (the request's snapshot's).
    func lease(name: String, config: UpstreamConfig, tls: UpstreamTLS?, delegate: UpstreamExchangeDelegate) {
        guard !config.endpoints.isEmpty else {
            delegate.upstreamLeaseFailed(.noEndpoints)
            return
        }
        let now = NIODeadline.now()
        guard let ep = pickEndpoint(name: name, config: config, now: now) else {
            delegate.upstreamLeaseFailed(.noEndpoints)
            return
        }
        ep.lease(config: config, tls: tls, delegate: delegate, now: now)
    }

    func trackInflight(_ c: UpstreamConnection) {
        guard c.inflightIndex < 0 else { return }
        c.inflightIndex = inflight.count
        inflight.append(c)
    }

    func untrackInflight(_ c: UpstreamConnection) {
        let i = c.inflightIndex
        guard i >= 0, i < inflight.count else { return }
        let last = inflight.removeLast()
        if i < inflight.count {
            inflight[i] = last
            last.inflightIndex = i
        }
        c.inflightIndex = -1
    }

    private func sweep() {
        let now = NIODeadline.now()
        var timedOut: [UpstreamConnection] = []
        for c in inflight {
            if let d = c.responseDeadline, d <= now { timedOut.append(c) }
        }
        for c in timedOut { c.responseTimedOut() }
        for pool in endpoints.values {
            pool.closeIdle(olderThan: now)
            pool.expireWaiters(now: now)
        }
        // Pools of upstreams a reload removed (or renamed) would otherwise
        // stay for ever; an empty one with nothing to remember is rebuilt
        // for free the next time it is needed.
        endpoints = endpoints.filter { !$0.value.isForgettable }
    }
}

/// Connections to one endpoint within one worker.
final class EndpointPool {
    let endpoint: UpstreamEndpoint
    unowned let pool: UpstreamPool
    private var idle: [UpstreamConnection] = []
    /// Open plus connecting connections.
    private var total = 0
    private var waiters = CircularBuffer<Waiter>()
    private var consecutiveFailures = 0
    private var ejectedUntil: NIODeadline?
    /// The most recent upstream config seen (limits and timeouts for new connections).
    private var config: UpstreamConfig?
    /// `https://`: the newest TLS settings a lease brought; new connections
    /// use them. Newer settings (a reload) retire the connections made with
    /// older ones; a lease from a request still on the older configuration
    /// does not switch back.
    private var tls: UpstreamTLS?
    /// A TLS handshake failure is logged once per run of failures.
    private var loggedHandshakeFailure = false

    struct Waiter {
        var delegate: UpstreamExchangeDelegate
        var deadline: NIODeadline
    }

    init(endpoint: UpstreamEndpoint, pool: UpstreamPool) {
        self.endpoint = endpoint
        self.pool = pool
    }

    /// No connection, no waiter, no failure to remember.
    var isForgettable: Bool {
        total == 0 && waiters.isEmpty && consecutiveFailures == 0 && ejectedUntil == nil
    }

    func isEjected(now: NIODeadline) -> Bool {
        guard let until = ejectedUntil else { return false }
        if until <= now {
            ejectedUntil = nil
            return false
        }
        return true
    }

    func lease(config: UpstreamConfig, tls: UpstreamTLS?, delegate: UpstreamExchangeDelegate, now: NIODeadline) {
        self.config = config
        if endpoint.tls, let offered = tls, offered.generation > (self.tls?.generation ?? 0) {
            self.tls = offered
            for c in idle { c.close() }
        }
        while let c = idle.popLast() {
            // A connection verified under settings a reload replaced (it was
            // busy at the reload) is not reused.
            if c.channel.isActive, !c.isClosed, c.tls?.generation == self.tls?.generation {
                c.begin(delegate: delegate, responseTimeout: config.responseTimeout, idleTimeout: config.idleTimeout)
                delegate.upstreamLeased(c)
                return
            }
            c.close()
        }
        if total < max(1, config.maxConnectionsPerEndpoint) {
            connect(config: config, delegate: delegate)
        } else {
            waiters.append(Waiter(delegate: delegate, deadline: now + config.responseTimeout))
        }
    }

    private func connect(config: UpstreamConfig, delegate: UpstreamExchangeDelegate) {
        total += 1
        let loop = pool.eventLoop
        // https:// without settings: only a snapshot whose TLS files did not
        // load gets here (serve and reload refuse those). Fail closed, never
        // fall back to cleartext.
        let tls = endpoint.tls ? self.tls : nil
        if endpoint.tls, tls == nil {
            total -= 1
            pool.logger.error("upstream has no TLS context", metadata: ["endpoint": "\(endpoint)"])
            delegate.upstreamLeaseFailed(.connectFailed)
            serveWaiter()
            return
        }
        let serverName = tls?.serverName ?? endpoint.host
        let connectTimeout = config.connectTimeout
        let started = NIODeadline.now()
        let future = ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(
                            OpenSSLHandler(client: tls.context, serverName: serverName))
                    }
                    try UpstreamClientHandler.install(on: channel.pipeline.syncOperations)
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel -> EventLoopFuture<Channel> in
                guard tls != nil else { return channel.eventLoop.makeSucceededFuture(channel) }
                // TCP and TLS together get `connectTimeout`, as a cleartext connect does.
                return OpenSSLHandler.clientHandshake(on: channel, deadline: started + connectTimeout).map { channel }
            }
        let bound = NIOLoopBound((self, delegate, tls), eventLoop: loop)
        future.whenComplete { result in
            let (ep, delegate, settings) = bound.value
            ep.connectCompleted(result, config: config, tls: settings, delegate: delegate)
        }
    }

    private func connectCompleted(
        _ result: Result<Channel, Error>, config: UpstreamConfig, tls: UpstreamTLS?,
        delegate: UpstreamExchangeDelegate
    ) {
        switch result {
        case .success(let channel):
            consecutiveFailures = 0
            ejectedUntil = nil
            loggedHandshakeFailure = false
            guard let handler = try? channel.pipeline.syncOperations.handler(type: UpstreamClientHandler.self)
            else {
                total -= 1
                channel.close(promise: nil)
                delegate.upstreamLeaseFailed(.connectFailed)
                serveWaiter()
                return
            }
            let c = UpstreamConnection(channel: channel, endpoint: self, handler: handler, tls: tls)
            if !channel.isActive {
                c.close()
                delegate.upstreamLeaseFailed(.connectFailed)
                return
            }
            c.begin(delegate: delegate, responseTimeout: config.responseTimeout, idleTimeout: config.idleTimeout)
            delegate.upstreamLeased(c)
        case .failure(let error):
            total -= 1
            consecutiveFailures += 1
            if let failed = error as? TLSClientHandshakeError, !loggedHandshakeFailure {
                // The usual cause is configuration (CA, name, client certificate):
                // say so once, not once per request.
                loggedHandshakeFailure = true
                let reason = failed.timedOut ? "no TLS handshake within \(DurationParser.format(config.connectTimeout))" : failed.reason
                pool.logger.warning("upstream TLS handshake failed", metadata: ["endpoint": "\(endpoint)", "reason": "\(reason)"])
            }
            if consecutiveFailures >= ejectAfterFailures {
                ejectedUntil = .now() + ejectCoolDown
                pool.logger.warning(
                    "upstream endpoint ejected", metadata: ["endpoint": "\(endpoint)", "failures": "\(consecutiveFailures)"])
            }
            var e = UpstreamError.connectFailed
            if case ChannelError.connectTimeout = error { e = .connectTimeout }
            if let failed = error as? TLSClientHandshakeError, failed.timedOut { e = .connectTimeout }
            delegate.upstreamLeaseFailed(e)
            serveWaiter()
        }
    }

    /// A finished keep-alive connection: hand it to a waiter or park it.
    func release(_ c: UpstreamConnection) {
        if c.tls?.generation != tls?.generation || !c.channel.isActive {
            // Verified under TLS settings a reload has replaced, or closed
            // while its last bytes were handed over: closing it lets a
            // waiter connect afresh (`connectionClosed`).
            c.close()
            return
        }
        if let w = waiters.popFirst() {
            c.begin(delegate: w.delegate, responseTimeout: config?.responseTimeout ?? .seconds(30),
                    idleTimeout: config?.idleTimeout ?? .seconds(60))
            w.delegate.upstreamLeased(c)
            return
        }
        c.idleSince = .now()
        idle.append(c)
    }

    func connectionClosed(_ c: UpstreamConnection) {
        total -= 1
        if let i = idle.firstIndex(where: { $0 === c }) { idle.remove(at: i) }
        serveWaiter()
    }

    private func serveWaiter() {
        guard !waiters.isEmpty, let config, total < max(1, config.maxConnectionsPerEndpoint) else { return }
        if let w = waiters.popFirst() { connect(config: config, delegate: w.delegate) }
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

    func expireWaiters(now: NIODeadline) {
        while let first = waiters.first, first.deadline <= now {
            waiters.removeFirst()
            first.delegate.upstreamLeaseFailed(.queueTimeout)
        }
    }
}
