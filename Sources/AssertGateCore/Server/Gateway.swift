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

    private struct State {
        var config: GatewayConfig
        /// The listeners as bound at start, each with the box its accepts read
        /// their TLS context from (swapped by `reloadCertificates`).
        var bound: [(listener: ListenerConfig, tls: NIOLockedValueBox<TLSServerContext>?)] = []
        var serverChannels: [any Channel] = []
        var started = false
        var shutDown = false
    }

    /// `group` is usually `MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)`:
    /// one worker per loop. The group stays owned by the caller.
    public init(
        config: GatewayConfig, enforcement: EnforcementContext? = nil, group: any EventLoopGroup, logger: Logger,
        hooks: GatewayHooks = GatewayHooks()
    ) {
        self.group = group
        self.logger = logger
        self.hooks = hooks
        self.state = NIOLockedValueBox(State(config: config))
        let snapshot = GatewaySnapshot(config: config, enforcement: enforcement)
        var workers: [ObjectIdentifier: NIOLoopBoundBox<Worker>] = [:]
        for loop in group.makeIterator() {
            let worker = Worker(eventLoop: loop, snapshot: snapshot, hooks: hooks, logger: logger)
            workers[ObjectIdentifier(loop)] = NIOLoopBoundBox.makeBoxSendingValue(worker, as: Worker.self, eventLoop: loop)
        }
        self.workers = workers
    }

    /// One event loop (= one worker) per core unless told otherwise.
    public static func makeEventLoopGroup(threads: Int? = nil) -> MultiThreadedEventLoopGroup {
        MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads ?? System.coreCount))
    }

    /// The configuration currently in force for new requests.
    public var config: GatewayConfig { state.withLockedValue { $0.config } }

    /// Binds every listener (port 0 = ephemeral) and returns the bound ports in listener order.
    public func start() async throws -> [Int] {
        let config = state.withLockedValue { s -> GatewayConfig in
            s.started = true
            return s.config
        }
        for (_, box) in workers {
            try await box.eventLoop.submit { box.value.upstreams.startSweeping() }.get()
        }
        var ports: [Int] = []
        var channels: [any Channel] = []
        var bound: [(listener: ListenerConfig, tls: NIOLockedValueBox<TLSServerContext>?)] = []
        do {
            for listener in config.listeners {
                // One SSL_CTX per listener, shared by every worker; a bad certificate
                // or key fails `start()` with a typed error naming the file.
                let tls = try listener.tls.map { NIOLockedValueBox(try TLSServerContext(config: $0)) }
                let channel = try await bind(listener, tls: tls)
                channels.append(channel)
                bound.append((listener, tls))
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

    private func bind(_ listener: ListenerConfig, tls: NIOLockedValueBox<TLSServerContext>?) async throws -> any Channel {
        let workers = self.workers
        let logger = self.logger
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
                    if worker.isQuiescing { throw ChannelError.ioOnClosedChannel }
                    let id = ObjectIdentifier(channel)
                    worker.connections[id] = channel
                    channel.closeFuture.whenComplete { _ in box.value.connections.removeValue(forKey: id) }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(
                        ConnectionTimeoutHandler(
                            handshakeTimeout: listener.handshakeTimeout, idleTimeout: listener.effectiveIdleTimeout,
                            headerTimeout: listener.headerTimeout))
                    if let tls {
                        // The context current at accept; a connection keeps it for its life.
                        try sync.addHandler(OpenSSLHandler(context: tls.withLockedValue { $0 }, logger: logger))
                        try sync.addHandler(ProtocolDetector(worker: worker, mode: .awaitNegotiation, scheme: "https"))
                    } else {
                        try sync.addHandler(ProtocolDetector(worker: worker))
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

    /// Reads the certificate and key of every running TLS listener again, from
    /// the files `config` names for the same address, so a renewed certificate
    /// (same path, new content) or a new path takes effect for new connections;
    /// open connections keep the one they started with. Every file is loaded
    /// before anything is swapped: one that fails leaves all listeners as they
    /// were and throws, naming it.
    public func reloadCertificates(from config: GatewayConfig) throws -> CertificateReload {
        let bound = state.withLockedValue { $0.bound }
        var result = CertificateReload()
        var swaps: [(NIOLockedValueBox<TLSServerContext>, TLSServerContext)] = []
        for running in bound {
            let address = running.listener.address
            guard let next = config.listeners.first(where: { $0.address == address }) else {
                result.needRestart.append("listener \(address) removed")
                continue
            }
            switch (running.tls, next.tls) {
            case (let box?, let tls?):
                swaps.append((box, try TLSServerContext(config: tls)))
                result.reloaded.append(address)
            case (nil, nil):
                break
            case (nil, _?):
                result.needRestart.append("listener \(address) gains TLS")
            case (_?, nil):
                result.needRestart.append("listener \(address) loses TLS")
            }
        }
        for next in config.listeners where !bound.contains(where: { $0.listener.address == next.address }) {
            result.needRestart.append("listener \(next.address) added")
        }
        for (box, context) in swaps { box.withLockedValue { $0 = context } }
        return result
    }

    /// Swaps in a new configuration: new requests use it, in-flight ones finish on the old.
    /// (Listeners are not rebound; changing them needs a restart.)
    public func reload(_ config: GatewayConfig, enforcement: EnforcementContext? = nil) async {
        state.withLockedValue { $0.config = config }
        let snapshot = GatewaySnapshot(config: config, enforcement: enforcement)
        for (_, box) in workers {
            try? await box.eventLoop.submit { box.value.snapshot = snapshot }.get()
        }
        logger.info("configuration reloaded")
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
