import GatewayTLS
import Logging
import NIOCore
import NIOPosix

/// The HTTP/2 connections of one worker to one `h2c://`/`h2://` endpoint of
/// one upstream. A request gets a stream on the connection with the fewest
/// free slots that still has one (packing streams keeps connections few);
/// a new connection is opened only when every one is full, up to
/// `maxConnectionsPerEndpoint`; past that, requests wait (until their
/// response timeout) for a stream to end. A client address may hold at most
/// `effectiveMaxConnectionsPerClient` streams at once, so a few clients
/// cannot take every slot. Loop-confined.
final class H2EndpointPool {
    let endpoint: UpstreamEndpoint
    unowned let pool: UpstreamPool
    private var connections: [UpstreamH2Connection] = []
    /// Connections retired (GOAWAY, reload) whose streams are finishing.
    private var retiring: [UpstreamH2Connection] = []
    private var connecting = 0
    private var waiters = CircularBuffer<Waiter>()
    /// Streams granted per client address (`maxConnectionsPerClient`).
    private var shares = ClientShares()
    /// The newest configuration a lease brought (`configGeneration`): what
    /// new connections are made with, and its limits and timeouts.
    private var config: UpstreamConfig?
    private var limits = PoolLimits()
    private var configGeneration = ConfigGeneration()
    private var tls: UpstreamTLS?
    private var ejection = EndpointEjection()
    private var loggedConnectFailure = false
    private var exhaustion: PoolExhaustion

    typealias Waiter = UpstreamWaiter

    init(endpoint: UpstreamEndpoint, pool: UpstreamPool) {
        self.endpoint = endpoint
        self.pool = pool
        exhaustion = PoolExhaustion(endpoint: endpoint, pool: pool)
    }

    var isForgettable: Bool {
        connections.isEmpty && retiring.isEmpty && connecting == 0 && waiters.isEmpty && ejection.isClear
            && !exhaustion.reported
    }

    func isEjected(now: NIODeadline) -> Bool { ejection.isEjected(now: now) }

    /// Connections open (ready or retiring) and being made (tests).
    var connectionCount: Int { connections.count + retiring.count + connecting }

    func lease(
        config offered: UpstreamConfig, generation: UInt64, tls: UpstreamTLS?, client: String?,
        responseTimeout: TimeAmount, delegate: UpstreamExchangeDelegate, now: NIODeadline
    ) {
        adopt(offered, generation: generation)
        if let newer = UpstreamTLS.replacing(self.tls, with: tls, on: endpoint) {
            self.tls = newer
            for c in connections { c.retire() }  // in-flight streams finish there
        }
        let w = Waiter(
            delegate: delegate, now: now, client: client, responseTimeout: responseTimeout, upstreamTimeout: limits.responseTimeout)
        if shares.count(client) < limits.perClient, let c = roomiest() {
            return grant(w, on: c)
        }
        waiters.append(w)
        connectIfNeeded()
        // Every slot taken, none coming and no connection left to open:
        // exhausted until a stream ends (a request held back only by its
        // client's share is not).
        if shares.count(client) < limits.perClient, connecting == 0, !canOpenConnection {
            exhaustion.requestWaited(now: now)
        }
    }

    /// As `EndpointPool.adopt`: a late lease from a request on an older
    /// snapshot never brings back the limits a reload replaced. Connections
    /// over a lowered limit are retired (their streams finish there).
    private func adopt(_ offered: UpstreamConfig, generation: UInt64) {
        guard configGeneration.takes(generation) else { return }
        config = offered
        limits = PoolLimits(offered)
        var surplus = connections.count + connecting - limits.connections
        while surplus > 0, let c = connections.min(by: { $0.granted < $1.granted }) {
            c.retire()
            surplus -= 1
        }
    }

    /// Connections that got a GOAWAY take no new stream: they do not count
    /// against the limit (a gRPC server's `max_connection_age` with long
    /// streaming calls would otherwise fill it with connections nobody may
    /// use), up to as many again.
    private var canOpenConnection: Bool {
        connections.count + connecting < limits.connections
            && connections.count + retiring.count + connecting < 2 * limits.connections
    }

    /// The ready connection with a free slot that is fullest (packing).
    private func roomiest() -> UpstreamH2Connection? {
        var best: UpstreamH2Connection?
        for c in connections where c.hasRoom {
            if best == nil || c.granted > (best?.granted ?? 0) { best = c }
        }
        return best
    }

    private func grant(_ w: Waiter, on c: UpstreamH2Connection) {
        shares.take(w.client)
        let stream = c.grant(delegate: w.delegate, client: w.client, responseTimeout: w.responseTimeout)
        w.delegate.upstreamLeased(stream)
    }

    /// Serves waiters in order (skipping those at their client's share)
    /// while a connection has room; opens a connection for the rest.
    private func serveWaiters() {
        var skipped = CircularBuffer<Waiter>()
        let cap = limits.perClient
        while let w = waiters.popFirst() {
            if w.departed { continue }
            guard shares.count(w.client) < cap else {
                skipped.append(w)
                continue
            }
            guard let c = roomiest() else {
                waiters.prepend(w)
                break
            }
            grant(w, on: c)
        }
        if !skipped.isEmpty {
            for w in waiters { skipped.append(w) }
            waiters = skipped
        }
        connectIfNeeded()
    }

    /// Waiters that a connection being made cannot all take get another
    /// connection, up to the limit. Those held back only by their client's
    /// share do not count: a free slot would not serve them either.
    private func connectIfNeeded() {
        guard !waiters.isEmpty, let config else { return }
        let cap = limits.perClient
        let eligible = waiters.reduce(0) { $0 + (!$1.departed && shares.count($1.client) < cap ? 1 : 0) }
        // A connection waiting for the server's SETTINGS will take more than its one stream.
        let unsettled = connections.reduce(0) { $0 + ($1.settingsSeen || $1.goingAway ? 0 : 1) }
        let coming = (connecting + unsettled) * max(1, config.maxStreamsPerConnection)
        guard eligible > coming, canOpenConnection else { return }
        connect(config: config)
    }

    // MARK: from connections

    /// The server's SETTINGS arrived: waiters may fit now.
    func roomChanged(on c: UpstreamH2Connection) {
        if !waiters.isEmpty { serveWaiters() }
    }

    func streamEnded(on c: UpstreamH2Connection, client: String?) {
        shares.give(client)
        if c.goingAway, c.isIdle { c.close() }
        if !waiters.isEmpty { serveWaiters() }
    }

    func connectionRetired(_ c: UpstreamH2Connection) {
        if let i = connections.firstIndex(where: { $0 === c }) {
            connections.remove(at: i)
            retiring.append(c)
        }
        // Waiting requests need another connection now.
        connectIfNeeded()
    }

    func connectionClosed(_ c: UpstreamH2Connection) {
        connections.removeAll { $0 === c }
        retiring.removeAll { $0 === c }
        if !waiters.isEmpty { serveWaiters() }
    }

    // MARK: connecting

    private func connect(config: UpstreamConfig) {
        let loop = pool.eventLoop
        let tls = endpoint.tls ? self.tls : nil
        if endpoint.tls, tls == nil {
            // Only a snapshot whose TLS files did not load gets here: fail closed.
            pool.logger.error("upstream has no TLS context", metadata: ["endpoint": "\(endpoint)"])
            return failWaiters(.connectFailed)
        }
        connecting += 1
        let serverName = tls?.serverName ?? endpoint.host
        let started = NIODeadline.now()
        let connectTimeout = config.connectTimeout
        let maxStreams = config.maxStreamsPerConnection
        let settings = HTTP2Session.Settings(
            maxConcurrentStreams: maxStreams, maxHeaderListBytes: Self.maxResponseHeaderListBytes, streamResetBurst: 1000,
            streamResetPerSecond: 1000, initialStreamWindow: Self.streamWindow, connectionWindow: Self.connectionWindow)
        let installed = NIOLoopBoundBox<(tls: OpenSSLHandler?, h2: UpstreamH2Connection?)>((nil, nil), eventLoop: loop)
        let unowned = NIOLoopBound(self, eventLoop: loop)
        let future = ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .resolver(HostAddressCache.shared.resolver(on: loop))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    var openSSL: OpenSSLHandler?
                    if let tls {
                        let handler = OpenSSLHandler(client: tls.context, serverName: serverName)
                        try sync.addHandler(handler)
                        openSSL = handler
                    }
                    let session = try HTTP2Session.client(settings, allocator: channel.allocator)
                    let h2 = UpstreamH2Connection(
                        session: session, endpoint: unowned.value, eventLoop: channel.eventLoop, tls: tls,
                        maxStreams: maxStreams)
                    try sync.addHandler(h2)
                    installed.value = (openSSL, h2)
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel -> EventLoopFuture<Channel> in
                guard tls != nil else { return channel.eventLoop.makeSucceededFuture(channel) }
                let handshake = UpstreamTLS.handshake(installed.value.tls, on: channel, deadline: started + connectTimeout)
                return handshake.flatMapThrowing {
                    // An h2:// endpoint must agree to HTTP/2: HTTP/1.1 bytes would read as a broken preface.
                    let alpn = installed.value.tls?.negotiatedALPN
                    guard alpn == "h2" else {
                        channel.close(promise: nil)
                        throw TLSClientHandshakeError(
                            reason: "the server did not select ALPN h2 (got \(alpn ?? "none"))", timedOut: false)
                    }
                    return channel
                }
            }
        future.whenComplete { result in
            unowned.value.connectCompleted(result, connection: installed.value.h2)
        }
    }

    private func connectCompleted(_ result: Result<Channel, Error>, connection: UpstreamH2Connection?) {
        connecting -= 1
        switch result {
        case .success(let channel):
            guard let connection, channel.isActive, !connection.isClosed else {
                channel.close(promise: nil)
                return connectFailed(UpstreamError.connectFailed, reason: "closed during set-up")
            }
            ejection.connected()
            loggedConnectFailure = false
            connection.isReady = true
            connections.append(connection)
            // Verified under TLS settings a reload replaced while it connected
            // (the pool's retired only the connections it already had): it
            // takes no stream and closes once idle, as theirs do.
            if endpoint.tls, connection.tls?.generation != tls?.generation {
                connection.retire()
            }
            serveWaiters()
        case .failure(let error):
            var reason = "\(error)"
            if let failed = error as? TLSClientHandshakeError {
                reason = failed.timedOut ? "no TLS handshake within \(DurationParser.format(limits.connectTimeout))" : failed.reason
            }
            connectFailed(UpstreamError(connectFailure: error), reason: reason)
        }
    }

    private func connectFailed(_ e: UpstreamError, reason: String) {
        ejection.failed(endpoint: endpoint, logger: pool.logger)
        if !loggedConnectFailure {
            // Usually configuration (address, CA, ALPN): said once per run of failures.
            loggedConnectFailure = true
            pool.logger.warning("upstream HTTP/2 connect failed", metadata: ["endpoint": "\(endpoint)", "reason": "\(reason)"])
        }
        // Nothing was sent: the waiters fail (idempotent requests retry another endpoint).
        if connections.contains(where: \.hasRoom) {
            serveWaiters()
        } else if connecting == 0 {
            failWaiters(e)
        }
    }

    private func failWaiters(_ e: UpstreamError) {
        let failed = waiters
        waiters.removeAll()
        for w in failed { w.delegate.upstreamLeaseFailed(e) }
    }

    // MARK: sweep

    var waiterCount: Int { waiters.count }

    func sweep(now: NIODeadline) {
        let responseTimeout = limits.responseTimeout
        let pingTimeout = limits.connectTimeout
        let idleTimeout = limits.idleTimeout
        for c in connections + retiring {
            c.sweep(now: now, responseTimeout: responseTimeout, pingTimeout: pingTimeout)
            if c.isIdle, c.idleSince + idleTimeout <= now { c.close() }
        }
        waiters.failExpired(now: now)
    }

    /// Reported to `/readyz` while requests have waited past the response
    /// timeout with every slot taken (`PoolExhaustion`).
    func checkExhaustion(upstream: String, now: NIODeadline) {
        let free = canOpenConnection || connections.contains(where: \.hasRoom)
        if let exhausted = exhaustion.check(free: free, now: now, timeout: limits.responseTimeout) {
            pool.exhaustionChanged(exhausted, upstream: upstream, endpoint: endpoint, key: exhaustion.key)
        }
    }

    /// Closes connections without streams (shutdown).
    func closeIdle() {
        for c in connections + retiring where c.isIdle { c.close() }
    }

    /// A stream's response window: what one slow client can leave unread at
    /// the gateway, as an HTTP/2 client's stream gets from the front end.
    static let streamWindow: UInt32 = 256 << 10
    /// The connection's window opens as bytes arrive, so this bounds only
    /// the bytes in flight, not what slow clients hold.
    static let connectionWindow: Int32 = 16 << 20
    static let maxResponseHeaderListBytes = 64 << 10
}
