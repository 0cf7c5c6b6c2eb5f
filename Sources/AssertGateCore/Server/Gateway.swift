import GatewayTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The gateway's data path: listeners, one `Worker` per event loop, graceful
/// shutdown and configuration reload. Signals and the CLI live elsewhere.
public final class Gateway: Sendable {
    public let group: any EventLoopGroup
    private let logger: Logger
    private let hooks: GatewayHooks
    private let workers: [ObjectIdentifier: NIOLoopBoundBox<Worker>]
    private let state: NIOLockedValueBox<State>
    /// Upstream pools that have been exhausted too long, from every worker (`/readyz`).
    public let upstreamHealth = UpstreamHealth()
    /// `limits.maxConnections` and `maxConnectionsPerAddress`, over every listener.
    let admission: ConnectionAdmission
    /// Client connections open now, over every listener and worker.
    public var openConnections: Int { admission.openConnections }

    /// What a listener's new connections start with; a reload may change it.
    struct LiveListener {
        /// Nil for a cleartext listener (switching needs a restart).
        var tls: TLSServerContext?
        var handshakeTimeout: TimeAmount
        var idleTimeout: TimeAmount
        var headerTimeout: TimeAmount

        init(_ listener: ListenerConfig, tls: TLSServerContext?) {
            self.tls = tls
            handshakeTimeout = listener.handshakeTimeout
            idleTimeout = listener.effectiveIdleTimeout
            headerTimeout = listener.headerTimeout
        }
    }

    private struct State {
        var snapshot: GatewaySnapshot
        /// The listeners as bound at start, each with the box its accepts read
        /// their TLS context and timeouts from (updated by `reloadListeners`).
        var bound: [(listener: ListenerConfig, live: NIOLockedValueBox<LiveListener>)] = []
        var serverChannels: [any Channel] = []
        var started = false
        var shutDown = false
    }

    /// `snapshot` comes from `GatewaySnapshot.build`. `group` is usually
    /// `MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)`: one
    /// worker per loop. The group stays owned by the caller.
    public init(
        snapshot: GatewaySnapshot, group: any EventLoopGroup, logger: Logger, hooks: GatewayHooks = GatewayHooks()
    ) {
        self.group = group
        self.logger = logger
        self.hooks = hooks
        self.state = NIOLockedValueBox(State(snapshot: snapshot))
        self.admission = ConnectionAdmission(.init(snapshot.config.limits))
        var workers: [ObjectIdentifier: NIOLoopBoundBox<Worker>] = [:]
        for loop in group.makeIterator() {
            let worker = Worker(
                eventLoop: loop, snapshot: snapshot, hooks: hooks, logger: logger, upstreamHealth: upstreamHealth)
            workers[ObjectIdentifier(loop)] = NIOLoopBoundBox.makeBoxSendingValue(worker, as: Worker.self, eventLoop: loop)
        }
        self.workers = workers
    }

    /// One event loop (= one worker) per core unless told otherwise.
    public static func makeEventLoopGroup(threads: Int? = nil) -> MultiThreadedEventLoopGroup {
        MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads ?? System.coreCount))
    }

    /// What new requests start with: the last snapshot given (a reload's
    /// `previous`, so unchanged upstream TLS contexts are reused).
    public var snapshot: GatewaySnapshot { state.withLockedValue { $0.snapshot } }

    /// True from the start of `shutdown` (`/readyz` answers 503 then).
    public var isShuttingDown: Bool { state.withLockedValue { $0.shutDown } }

    /// The configuration currently in force for new requests.
    public var config: GatewayConfig { snapshot.config }

    /// Binds every listener (port 0 = ephemeral) and returns the bound ports in listener order.
    public func start() async throws -> [Int] {
        let config = state.withLockedValue { s -> GatewayConfig in
            s.started = true
            return s.snapshot.config
        }
        for (_, box) in workers {
            try await box.eventLoop.submit { box.value.upstreams.startSweeping() }.get()
        }
        var ports: [Int] = []
        var channels: [any Channel] = []
        var bound: [(listener: ListenerConfig, live: NIOLockedValueBox<LiveListener>)] = []
        do {
            for listener in config.listeners {
                // One SSL_CTX per listener, shared by every worker; a bad certificate
                // or key fails `start()` with a typed error naming the file.
                let tls = try listener.tls.map { try TLSServerContext(config: $0) }
                let live = NIOLockedValueBox(LiveListener(listener, tls: tls))
                let channel: any Channel
                do {
                    channel = try await bind(listener, live: live)
                } catch {
                    throw ListenerBindError(address: listener.address, underlying: error)
                }
                channels.append(channel)
                bound.append((listener, live))
                ports.append(channel.localAddress?.port ?? listener.address.port)
            }
        } catch {
            for c in channels { try? await c.close() }
            throw error
        }
        state.withLockedValue {
            $0.serverChannels = channels
            $0.bound = bound
        }
        logger.info("gateway listening", metadata: ["ports": "\(ports)"])
        return ports
    }

    private func bind(_ listener: ListenerConfig, live: NIOLockedValueBox<LiveListener>) async throws -> any Channel {
        let workers = self.workers
        let logger = self.logger
        let admission = self.admission
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                guard let box = workers[ObjectIdentifier(channel.eventLoop)] else {
                    return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
                }
                return channel.eventLoop.makeCompletedFuture {
                    let worker = box.value
                    // Before any handler: a refused connection costs no read
                    // and no handshake. Thrown, it is closed by the bootstrap.
                    switch admission.admit(channel.remoteAddress) {
                    case .success(let ticket):
                        channel.closeFuture.whenComplete { _ in admission.release(ticket) }
                    case .failure(let refusal):
                        worker.noteRefusal(refusal)
                        throw refusal
                    }
                    if worker.isQuiescing { throw ChannelError.ioOnClosedChannel }
                    let id = ObjectIdentifier(channel)
                    worker.connectionOpened(id, channel)
                    channel.closeFuture.whenComplete { _ in box.value.connectionClosed(id) }
                    let sync = channel.pipeline.syncOperations
                    // TLS and the handshake timeout as at accept; the idle and
                    // header timeouts follow reloads (`ConnectionTimeoutHandler`).
                    let settings = live.withLockedValue { $0 }
                    let timeouts = ConnectionTimeoutHandler(
                        handshakeTimeout: settings.handshakeTimeout, idleTimeout: settings.idleTimeout,
                        headerTimeout: settings.headerTimeout,
                        current: { live.withLockedValue { ($0.idleTimeout, $0.headerTimeout) } })
                    try sync.addHandler(timeouts)
                    if let tls = settings.tls {
                        try sync.addHandler(OpenSSLHandler(context: tls, logger: logger))
                        try sync.addHandler(
                            ProtocolDetector(worker: worker, mode: .awaitNegotiation, scheme: "https", timeouts: timeouts))
                    } else {
                        try sync.addHandler(ProtocolDetector(worker: worker, timeouts: timeouts))
                    }
                }
            }
            .bind(host: listener.address.host, port: listener.address.port)
            .get()
    }

    /// What a reload did to the listeners.
    public struct CertificateReload: Sendable {
        /// TLS listeners whose certificate and key were read again.
        public var reloaded: [HostPort] = []
        /// Listener changes that need a restart (added, removed, TLS switched on or off).
        public var needRestart: [String] = []
    }

    /// Applies `config`'s listener settings to the running listeners, for new
    /// connections (open ones keep theirs): every TLS listener's certificate
    /// and key are read again, so a renewed certificate (same path, new
    /// content) or a new path takes effect, and the handshake, header and idle
    /// timeouts follow the file (the idle default grows with the slowest
    /// upstream's `responseTimeout`). Listeners pair by position, else by
    /// address. Every file is loaded before anything changes: one that fails
    /// leaves all listeners as they were and throws, naming it.
    public func reloadListeners(from config: GatewayConfig) throws -> CertificateReload {
        let bound = state.withLockedValue { $0.bound }
        var result = CertificateReload()
        var updates: [(NIOLockedValueBox<LiveListener>, LiveListener)] = []
        var paired = Set<Int>()
        for (i, running) in bound.enumerated() {
            let address = running.listener.address
            let j: Int? =
                i < config.listeners.count && config.listeners[i].address == address && !paired.contains(i)
                ? i : config.listeners.indices.first { !paired.contains($0) && config.listeners[$0].address == address }
            guard let j else {
                result.needRestart.append("listener \(address) removed")
                continue
            }
            paired.insert(j)
            let next = config.listeners[j]
            switch (running.listener.tls, next.tls) {
            case (_?, let tls?):
                updates.append((running.live, LiveListener(next, tls: try TLSServerContext(config: tls))))
                result.reloaded.append(address)
            case (nil, nil):
                updates.append((running.live, LiveListener(next, tls: nil)))
            case (nil, _?):
                result.needRestart.append("listener \(address) gains TLS")
            case (_?, nil):
                result.needRestart.append("listener \(address) loses TLS")
            }
        }
        for j in config.listeners.indices where !paired.contains(j) {
            result.needRestart.append("listener \(config.listeners[j].address) added")
        }
        for (box, settings) in updates { box.withLockedValue { $0 = settings } }
        return result
    }

    /// Swaps in a new snapshot (from `GatewaySnapshot.build`): new requests
    /// use it, in-flight ones finish on the old. (Listeners are not rebound;
    /// changing them needs a restart.)
    public func reload(_ snapshot: GatewaySnapshot) async {
        state.withLockedValue { $0.snapshot = snapshot }
        admission.update(.init(snapshot.config.limits))
        for (_, box) in workers {
            try? await box.eventLoop.submit { box.value.snapshot = snapshot }.get()
        }
        // GatewayServer logs the reload once, with the file; this is the swap itself.
        logger.debug("routing snapshot swapped", metadata: ["workers": "\(workers.count)"])
    }

    /// Request-body bytes held in memory for checks right now, summed over the
    /// workers (each bounded by `limits.maxBufferedBodyBytes`).
    public func bufferedBodyBytes() async throws -> Int {
        var total = 0
        for (_, box) in workers {
            total += try await box.eventLoop.submit { box.value.bufferedBodyBytes }.get()
        }
        return total
    }

    /// Requests queued for an upstream connection or stream slot right now,
    /// summed over the workers' pools (tests: departed ones must not stay).
    public func queuedUpstreamWaiters() async throws -> Int {
        var total = 0
        for (_, box) in workers {
            total += try await box.eventLoop.submit { box.value.upstreams.waiterCount }.get()
        }
        return total
    }

    /// Stops accepting, sends GOAWAY / `Connection: close`, waits for in-flight
    /// requests up to `deadline`, then closes what is left.
    public func shutdown(deadline: NIODeadline) async {
        let channels = state.withLockedValue { s -> [any Channel] in
            guard !s.shutDown else { return [] }
            s.shutDown = true
            let c = s.serverChannels
            s.serverChannels = []
            return c
        }
        for c in channels { try? await c.close() }
        // Quiesce every live connection on its own loop.
        for (_, box) in workers {
            try? await box.eventLoop.submit {
                let w = box.value
                w.isQuiescing = true
                for (_, ch) in w.connections { ch.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
            }.get()
        }
        // Wait until every connection has closed itself, or the deadline.
        var closeFutures: [EventLoopFuture<Void>] = []
        for (_, box) in workers {
            let fs = try? await box.eventLoop.submit { box.value.connections.values.map(\.closeFuture) }.get()
            closeFutures.append(contentsOf: fs ?? [])
        }
        let futures = closeFutures
        let loop = group.next()
        let drained = loop.makePromise(of: Void.self)
        let done = NIOLoopBoundBox.makeBoxSendingValue(false, as: Bool.self, eventLoop: loop)
        loop.execute {
            EventLoopFuture.andAllComplete(futures, on: loop).whenComplete { _ in
                if !done.value {
                    done.value = true
                    drained.succeed()
                }
            }
            loop.scheduleTask(deadline: deadline) {
                if !done.value {
                    done.value = true
                    drained.succeed()
                }
            }
        }
        try? await drained.futureResult.get()
        for (_, box) in workers {
            try? await box.eventLoop.submit {
                let w = box.value
                for (_, ch) in w.connections { ch.close(promise: nil) }
                w.upstreams.shutdown()
            }.get()
        }
        logger.info("gateway stopped")
    }
}
