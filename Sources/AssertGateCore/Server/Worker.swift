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
    var snapshot: GatewaySnapshot
    var requestIds = RequestIdGenerator()
    /// Live downstream connections, for graceful shutdown.
    var connections: [ObjectIdentifier: Channel] = [:]
    var isQuiescing = false

    init(eventLoop: EventLoop, snapshot: GatewaySnapshot, hooks: GatewayHooks, logger: Logger) {
        self.eventLoop = eventLoop
        self.logger = logger
        self.snapshot = snapshot
        self.upstreams = UpstreamPool(eventLoop: eventLoop, logger: logger)
        self.gate = hooks.makeGate(eventLoop)
        self.localHandlers = hooks.makeLocalHandlers(eventLoop)
        self.observer = hooks.makeObserver(eventLoop)
    }

    /// X-Request-Id for a request: the client's if valid, else a new UUID.
    func requestId(clientValue: String?) -> String {
        if let v = clientValue, RequestId.isValid(v) { return v }
        return requestIds.make()
    }
}

