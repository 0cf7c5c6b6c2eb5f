import GatewayTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The whole gateway as `assertgate serve` runs it: configuration, workers,
/// store, enforcement hooks, admin listener; reload and graceful shutdown.
/// Signals stay in the CLI so this can be driven from tests.
public final class GatewayServer: Sendable {
    public let configPath: String
    public let ports: [Int]
    public let adminPort: Int
    public let metrics: GatewayMetrics
    private let gateway: Gateway
    /// Client connections open now (what `limits.maxConnections` counts).
    public var openConnections: Int { gateway.openConnections }
    private let admin: AdminServer
    private let stores: any StoreProvider
    let refresher: ReceiptRefresher?
    /// The refresher's own thread: TLS handshakes with Apple and receipt
    /// parsing never run on a worker loop that serves requests.
    private let refresherGroup: MultiThreadedEventLoopGroup?
    /// Delivers queued DeviceCheck bit updates (with a `deviceCheck:` section).
    private let updater: NIOLoopBound<DeviceBitUpdater>?
    /// What a reload cannot change (admin address, store, receipt refresh): compared to warn.
    private let startedConfig: GatewayConfig
    private let group: MultiThreadedEventLoopGroup
    private let threadPool: NIOThreadPool
    private let logger: Logger
    private let reloading = NIOLockedValueBox(false)

    /// The loops the workers serve requests on, one per worker.
    public var workerEventLoops: [any EventLoop] { Array(group.makeIterator()) }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Loads and validates `configPath`, binds every listener and the admin
    /// listener. `workers` defaults to one event loop per core.
    public static func start(configPath: String, workers: Int? = nil, logger: Logger) async throws -> GatewayServer {
        let config: GatewayConfig
        do {
            config = try ConfigLoader.load(path: configPath)
        } catch {
            throw StartError(description: error.diagnostics.map(\.description).joined(separator: "\n"))
        }
        let snapshot: GatewaySnapshot
        do {
            snapshot = try GatewaySnapshot.build(config: config)
        } catch {
            throw StartError(description: "\(configPath): \(error)")
        }
        Self.logWarnings(config, logger)
        let descriptors = FileDescriptorLimit.raise()
        if descriptors < FileDescriptorLimit.hard {
            logger.warning(
                "the descriptor limit could not be raised to the hard limit",
                metadata: ["descriptorLimit": "\(descriptors)", "hardLimit": "\(FileDescriptorLimit.hard)"])
        }
        if let set = config.limits.maxConnections, set > descriptors / 2 {
            logger.warning(
                "limits.maxConnections leaves less than half the descriptor limit for upstream and store connections",
                metadata: ["maxConnections": "\(set)", "descriptorLimit": "\(descriptors)"])
        }

        let group = Gateway.makeEventLoopGroup(threads: workers)
        let threadPool = NIOThreadPool(numberOfThreads: 1)
        threadPool.start()
        let metrics = GatewayMetrics()
        let stores: any StoreProvider
        do {
            stores = try StoreFactory.makeProvider(config.store, group: group, logger: logger, metrics: metrics)
        } catch {
            try? await threadPool.shutdownGracefully()
            try? await group.shutdownGracefully()
            throw StartError(description: "store: \(error)")
        }
        let refresherGroup = config.fraudMetric.map { _ in MultiThreadedEventLoopGroup(numberOfThreads: 1) }
        /// Everything started so far, released when a later step fails.
        func releaseAll() async {
            try? await refresherGroup?.shutdownGracefully()
            try? await stores.shutdown().get()
            try? await threadPool.shutdownGracefully()
            try? await group.shutdownGracefully()
        }
        var refresher: ReceiptRefresher?
        // A built snapshot always has its enforcement context.
        if let fraud = config.fraudMetric, let refresherGroup, let enforcement = snapshot.enforcement {
            do {
                refresher = try Self.makeRefresher(
                    fraud, enforcement: enforcement, loop: refresherGroup.next(),
                    store: stores.store(for: group.next()), threadPool: threadPool, metrics: metrics, logger: logger)
            } catch {
                await releaseAll()
                throw StartError(description: "\(error)")
            }
        }
        // DeviceCheck's Apple client, like the receipt refresher, is made at
        // start: a reload does not change the Apple key or hosts.
        var deviceCheckClient: DeviceCheckClient?
        if let dc = config.deviceCheck {
            do {
                deviceCheckClient = try DeviceCheckClient(config: dc)
            } catch {
                await releaseAll()
                throw StartError(description: "\(error)")
            }
        }
        let challengeLimiter = SharedPeerRateLimiter(rate: config.attestation.challengeRate)
        var hooks = GatewayHooks(
            makeGate: { loop in AssertionGate(eventLoop: loop, store: stores.store(for: loop), metrics: metrics) },
            makeLocalHandlers: { loop in
                [
                    AttestationRoutes(
                        eventLoop: loop, store: stores.store(for: loop), threadPool: threadPool,
                        limiter: challengeLimiter, metrics: metrics)
                ]
            },
            makeObserver: { _ in RequestObservers([MetricsObserver(metrics: metrics), RequestLog(logger: logger)]) },
            openStreams: metrics.openStreams, queuedResponseBytes: metrics.queuedResponseBytes)
        var updater: NIOLoopBound<DeviceBitUpdater>?
        if let client = deviceCheckClient, let dc = config.deviceCheck {
            let complaints = DeviceCheckComplaints()
            let dcMetrics = DeviceCheckMetrics(family: metrics.deviceCheckCalls, latency: metrics.deviceCheckDuration)
            let loop = group.next()
            var updaterSettings = DeviceBitUpdater.Settings(
                retryFor: dc.updateRetryFor, pollEvery: dc.updatePollEvery, batch: dc.updateBatch)
            // A claim must outlast a delivery (Apple's answer may take the
            // whole timeout), or another gateway sends the update again.
            updaterSettings.lease = max(updaterSettings.lease, dc.timeout * 2 + .seconds(5))
            let settings = updaterSettings
            let depth = metrics.deviceCheckQueueDepth
            updater = try? await loop.submit {
                NIOLoopBound(
                    DeviceBitUpdater(
                        loop: loop, store: stores.store(for: loop), client: client, settings: settings, metrics: dcMetrics,
                        depth: depth, logger: logger, complaints: complaints),
                    eventLoop: loop)
            }.get()
            hooks.makeDeviceCheck = { loop in
                let store = stores.store(for: loop)
                return DeviceCheckService(
                    eventLoop: loop, client: client, defaultEnvironment: dc.environment,
                    claim: { store.claimDeviceToken(hash: $0, ttl: DeviceCheckService.spentFor) },
                    enqueue: { store.enqueueDeviceBitUpdate($0, maxQueued: dc.maxQueuedUpdates) }, metrics: dcMetrics,
                    logger: logger, complaints: complaints)
            }
        }
        let gateway = Gateway(snapshot: snapshot, group: group, logger: logger, hooks: hooks)
        let ports: [Int]
        do {
            ports = try await gateway.start()
        } catch {
            await releaseAll()
            throw StartError(description: error is ListenerBindError ? "\(error)" : "cannot start listeners: \(error)")
        }
        let serverBox = NIOLockedValueBox<GatewayServer?>(nil)
        let actions = StoreAdminActions(stores: stores, loop: group.next()) {
            guard let server = serverBox.withLockedValue({ $0 }) else {
                return .failure(AdminReloadError(message: "starting"))
            }
            return await server.reload()
        }
        // Ready when every worker's store answers: a load balancer must not
        // send traffic while one worker's Redis connection is still down.
        let workerLoops = Array(group.makeIterator())
        let admin: AdminServer
        do {
            admin = try await AdminServer.start(
                address: config.admin.address, token: config.admin.token, metrics: metrics.registry,
                readiness: {
                    for loop in workerLoops where (try? await stores.store(for: loop).ping().get()) == nil {
                        return false
                    }
                    return true
                },
                actions: actions, exhaustedUpstreams: { [gateway] in gateway.upstreamHealth.exhaustedUpstreams },
                draining: { [gateway] in gateway.isShuttingDown },
                group: group, logger: logger)
        } catch {
            await gateway.shutdown(deadline: .now())
            await releaseAll()
            throw StartError(
                description: "admin listener: \(ListenerBindError(address: config.admin.address, underlying: error))")
        }
        let server = GatewayServer(
            configPath: configPath, ports: ports, adminPort: admin.port, metrics: metrics, gateway: gateway,
            admin: admin, stores: stores, refresher: refresher, refresherGroup: refresherGroup, updater: updater,
            startedConfig: config, group: group, threadPool: threadPool, logger: logger)
        serverBox.withLockedValue { $0 = server }
        refresher?.start()
        if let updater { updater.eventLoop.execute { updater.value.start() } }
        return server
    }

    private static func makeRefresher(
        _ fraud: FraudMetricConfig, enforcement: EnforcementContext, loop: EventLoop, store: any Store,
        threadPool: NIOThreadPool, metrics: GatewayMetrics, logger: Logger
    ) throws -> ReceiptRefresher {
        let tls: TLSClientContext
        do {
            tls = try TLSClientContext(caFile: fraud.caFile, certificatePath: nil, privateKeyPath: nil)
        } catch {
            throw StartError(description: "fraudMetric: \(error)")
        }
        guard let production = AppleHTTPSClient(baseURL: fraud.baseURL, tls: tls) else {
            throw StartError(description: "fraudMetric.baseURL: '\(fraud.baseURL)' is not https://host[:port]")
        }
        guard let development = AppleHTTPSClient(baseURL: fraud.developmentBaseURL, tls: tls) else {
            throw StartError(description: "fraudMetric.developmentBaseURL: '\(fraud.developmentBaseURL)' is not https://host[:port]")
        }
        let token: DeviceCheckToken
        do {
            token = try DeviceCheckToken(pem: fraud.privateKey.value, teamId: fraud.teamId, keyId: fraud.keyId)
        } catch {
            throw StartError(description: "fraudMetric.privateKey: \(error)")
        }
        let settings = ReceiptRefresher.Settings(
            pollEvery: fraud.pollEvery, refreshEvery: fraud.refreshEvery.nanoseconds / 1_000_000_000)
        return ReceiptRefresher(
            eventLoop: loop, store: store, production: production, development: development,
            token: token,
            anchors: enforcement.verifier.receiptAnchors, clockSkew: enforcement.verifier.clockSkewSeconds,
            settings: settings, threadPool: threadPool, metrics: metrics, logger: logger)
    }

    /// What of `deviceCheck` the Apple client and the update worker were
    /// built from (compared on reload: a change needs a restart, and says so).
    private static func deviceCheckSettings(_ d: DeviceCheckConfig?) -> [String] {
        guard let d else { return [] }
        return [
            d.teamId, d.keyId, d.privateKey.value, d.baseURL, d.developmentBaseURL, d.environment.rawValue,
            "\(d.timeout)", "\(d.updateRetryFor)", "\(d.updatePollEvery)", "\(d.updateBatch)", "\(d.maxQueuedUpdates)",
            d.caFile ?? "",
        ]
    }

    private static func refreshSettings(_ f: FraudMetricConfig?) -> [String] {
        guard let f else { return [] }
        return [
            f.teamId, f.keyId, f.privateKey.value, f.baseURL, f.developmentBaseURL, "\(f.refreshEvery)",
            "\(f.pollEvery)", f.caFile ?? "",
        ]
    }

    private init(
        configPath: String, ports: [Int], adminPort: Int, metrics: GatewayMetrics, gateway: Gateway,
        admin: AdminServer, stores: any StoreProvider, refresher: ReceiptRefresher?,
        refresherGroup: MultiThreadedEventLoopGroup?, updater: NIOLoopBound<DeviceBitUpdater>?,
        startedConfig: GatewayConfig, group: MultiThreadedEventLoopGroup,
        threadPool: NIOThreadPool, logger: Logger
    ) {
        self.refresher = refresher
        self.updater = updater
        self.refresherGroup = refresherGroup
        self.startedConfig = startedConfig
        self.configPath = configPath
        self.ports = ports
        self.adminPort = adminPort
        self.metrics = metrics
        self.gateway = gateway
        self.admin = admin
        self.stores = stores
        self.group = group
        self.threadPool = threadPool
        self.logger = logger
    }

    /// The file's warnings, and loudly the test trust anchors (at start and on every reload).
    private static func logWarnings(_ config: GatewayConfig, _ logger: Logger) {
        for warning in config.warnings { logger.warning("\(warning)") }
        if !config.attestation.trustAnchors.isEmpty || !config.attestation.receiptTrustAnchors.isEmpty {
            logger.warning(
                "TEST TRUST ANCHORS IN USE: attestations are NOT checked against Apple's roots",
                metadata: ["trustAnchors": "\(config.attestation.trustAnchors)"])
        }
    }

    /// SIGHUP and `POST /reload`: a file that does not validate is logged and
    /// the running configuration stays. Listener and store changes need a restart.
    public func reload() async -> Result<Void, AdminReloadError> {
        // One at a time: two overlapping reloads could leave listeners and workers
        // on different files. The second is refused, not queued; its caller can retry.
        let alreadyRunning = reloading.withLockedValue { busy -> Bool in
            if busy { return true }
            busy = true
            return false
        }
        if alreadyRunning {
            // Said in the log: a SIGHUP has no one to answer, and an edit it
            // was meant to apply would otherwise go unnoticed.
            logger.warning("reload refused: another reload is in progress; send it again")
            return .failure(AdminReloadError(message: "another reload is in progress; try again"))
        }
        defer { reloading.withLockedValue { $0 = false } }
        let config: GatewayConfig
        let snapshot: GatewaySnapshot
        let certificates: Gateway.CertificateReload
        do {
            config = try ConfigLoader.load(path: configPath)
            snapshot = try GatewaySnapshot.build(config: config, previous: gateway.snapshot)
            // The Apple client is made at start: routes could not reach Apple.
            if config.deviceCheck != nil, startedConfig.deviceCheck == nil {
                return rejected("deviceCheck: added by this reload; the DeviceCheck client is made at start: restart the gateway")
            }
            // Last: it swaps the listeners' certificates once every one has loaded.
            certificates = try gateway.reloadListeners(from: config)
        } catch let error as ConfigError {
            return rejected(error.diagnostics.map(\.description).joined(separator: "\n"))
        } catch {
            return rejected("\(error)")
        }
        // What start says loudly, a reload says too: a SIGHUP must not slip in test anchors quietly.
        Self.logWarnings(config, logger)
        if Self.deviceCheckSettings(config.deviceCheck) != Self.deviceCheckSettings(startedConfig.deviceCheck),
            config.deviceCheck != nil
        {
            logger.warning(
                "deviceCheck changed: Apple's key, hosts and timeouts and the update worker's settings stay as started until a restart")
        }
        if Self.refreshSettings(config.fraudMetric) != Self.refreshSettings(startedConfig.fraudMetric) {
            logger.warning("fraudMetric changed: receipt refresh keeps running as started until a restart")
        }
        for change in certificates.needRestart {
            logger.warning("\(change): listeners keep running as started until a restart")
        }
        if config.admin.address != startedConfig.admin.address {
            logger.warning("admin.address changed: the admin listener stays on \(startedConfig.admin.address) until a restart")
        }
        if config.store != startedConfig.store {
            logger.warning("store changed: the running store connections stay until a restart")
        }
        if !certificates.reloaded.isEmpty {
            logger.info("TLS certificates reloaded", metadata: ["listeners": "\(certificates.reloaded.map(\.description))"])
        }
        await gateway.reload(snapshot)
        if let refresher, let verifier = snapshot.enforcement?.verifier {
            refresher.follow(anchors: verifier.receiptAnchors, clockSkew: verifier.clockSkewSeconds)
        }
        admin.update(token: config.admin.token)
        LogBootstrap.control.apply(config.logging)
        metrics.configReloads.labels("success").inc()
        logger.info("configuration reloaded", metadata: ["file": "\(configPath)"])
        return .success(())
    }

    private func rejected(_ message: String) -> Result<Void, AdminReloadError> {
        metrics.configReloads.labels("failure").inc()
        logger.error("reload refused; keeping the running configuration", metadata: ["errors": "\(message)"])
        return .failure(AdminReloadError(message: message))
    }

    /// SIGTERM: stop accepting, GOAWAY, drain in-flight requests up to `drain`, then stop.
    public func shutdown(drain: TimeAmount) async {
        logger.info("shutting down", metadata: ["drainSeconds": "\(drain.nanoseconds / 1_000_000_000)"])
        // The drain starts now and its deadline is counted from the signal: the
        // background work stops meanwhile (a receipt refresh waits for Apple's
        // answer, up to 15 s, which must not push the drain past a service
        // manager's stop timeout).
        let deadline = NIODeadline.now() + drain
        async let drained: Void = gateway.shutdown(deadline: deadline)
        try? await refresher?.stop().get()
        try? await refresherGroup?.shutdownGracefully()
        if let updater {
            try? await updater.eventLoop.flatSubmit { updater.value.stop() }.get()
        }
        await drained
        try? await admin.close()
        try? await stores.shutdown().get()
        try? await threadPool.shutdownGracefully()
        try? await group.shutdownGracefully()
    }
}
