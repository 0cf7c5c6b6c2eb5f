#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore

/// Everything one event loop owns (as in nghttpx): the upstream pools, the
/// policy hooks, the current config snapshot and the live connections.
/// Loop-confined; the Gateway only touches it through `eventLoop.execute`.
final class Worker {
    let eventLoop: EventLoop
    let logger: Logger
    let upstreams: UpstreamPool
    /// `var` so tests can install a gate after construction.
    var gate: any RequestGate
    /// `var` so tests can install handlers after construction.
    var localHandlers: [any LocalHandler]
    var observer: (any RequestObserver)?
    var snapshot: GatewaySnapshot {
        didSet { responseQueue.limit = snapshot.config.limits.effectiveMaxQueuedResponseBytes }
    }
    var requestIds = RequestIdGenerator()
    /// The last rendering of the upstream forwarding lines (`UpstreamHeadWriter.addForwarding`).
    let forwarding = ForwardingCache()
    /// Live downstream connections, for graceful shutdown.
    var connections: [ObjectIdentifier: Channel] = [:]
    var isQuiescing = false
    /// Request pipelines started and not finished (`assertgate_open_streams`).
    let openRequests = LoopCounter()
    /// Response bytes queued for this worker's HTTP/2 clients, and their budget.
    let responseQueue: ResponseQueueBudget

    init(
        eventLoop: EventLoop, snapshot: GatewaySnapshot, hooks: GatewayHooks, logger: Logger,
        upstreamHealth: UpstreamHealth = UpstreamHealth()
    ) {
        self.eventLoop = eventLoop
        self.logger = logger
        self.snapshot = snapshot
        self.responseQueue = ResponseQueueBudget(limit: snapshot.config.limits.effectiveMaxQueuedResponseBytes)
        self.upstreams = UpstreamPool(eventLoop: eventLoop, logger: logger, health: upstreamHealth)
        self.gate = hooks.makeGate(eventLoop)
        self.localHandlers = hooks.makeLocalHandlers(eventLoop)
        self.observer = hooks.makeObserver(eventLoop)
        self.deviceCheck = hooks.makeDeviceCheck?(eventLoop)
        hooks.openStreams?.attach(openRequests)
        hooks.queuedResponseBytes?.attach(responseQueue.queued)
    }

    /// DeviceCheck for routes that ask it (nil without a `deviceCheck:` section).
    var deviceCheck: DeviceCheckService?

    /// Request-body bytes the worker's pipelines hold in memory for checks
    /// (`limits.maxBufferedBodyBytes`).
    private(set) var bufferedBodyBytes = 0

    /// False when `bytes` more would exceed the budget (nothing is reserved then).
    func reserveBufferedBody(_ bytes: Int) -> Bool {
        let limit = snapshot.config.limits.effectiveMaxBufferedBodyBytes
        guard bufferedBodyBytes + bytes <= limit else { return false }
        bufferedBodyBytes += bytes
        return true
    }

    func releaseBufferedBody(_ bytes: Int) {
        bufferedBodyBytes -= bytes
    }

    // MARK: connections, and memory after bursts

    /// The most connections open at once since memory was last given back.
    private var peakConnections = 0
    private var trimScheduled = false
    /// A burst smaller than this leaves too little behind to be worth a trim.
    static let trimAfterPeak = 64

    func connectionOpened(_ id: ObjectIdentifier, _ channel: Channel) {
        connections[id] = channel
        peakConnections = max(peakConnections, connections.count)
    }

    /// When each kind of refusal was last logged: a flood is logged once a minute, counted always.
    private var refusalLogged: [ConnectionRefusal: NIODeadline] = [:]

    /// A connection closed at accept: counted (the observer), and logged.
    func noteRefusal(_ refusal: ConnectionRefusal) {
        observer?.connectionRefused(refusal)
        let now = NIODeadline.now()
        if let last = refusalLogged[refusal], now - last < .minutes(1) { return }
        refusalLogged[refusal] = now
        let key = refusal == .total ? "limits.maxConnections" : "limits.maxConnectionsPerAddress"
        logger.warning(
            "client connections refused at accept (logged at most once a minute per worker)",
            metadata: ["reason": "\(refusal.rawValue)", "limit": "\(key)"])
    }

    func connectionClosed(_ id: ObjectIdentifier) {
        connections.removeValue(forKey: id)
        // A burst has ended (down to a quarter of its peak): glibc keeps the freed
        // pages of every connection's buffers in its arenas for ever unless asked,
        // so the process would stay at its peak size (nghttpx drops back).
        if peakConnections >= Self.trimAfterPeak, connections.count <= peakConnections / 4, !trimScheduled {
            trimScheduled = true
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            eventLoop.scheduleTask(in: .seconds(1)) { bound.value.trimMemory() }
        }
    }

    private func trimMemory() {
        trimScheduled = false
        peakConnections = connections.count
        #if canImport(Glibc)
        // glibc's malloc_trim (malloc.h, which the Glibc module leaves out): found once per trim.
        typealias MallocTrim = @convention(c) (Int) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") {
            _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
        }
        #endif
    }

    /// X-Request-Id for a request: the client's if valid, else a new UUID.
    func requestId(clientValue: String?) -> String {
        if let v = clientValue, RequestId.isValid(v) { return v }
        return requestIds.make()
    }
}

