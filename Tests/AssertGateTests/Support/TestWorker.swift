import Logging
import NIOCore

@testable import AssertGateCore

extension Worker {
    /// A worker for tests without sockets: one upstream `u` with no endpoints
    /// (a forwarded request ends in 502) behind a `/api/` route of `mode`,
    /// then whatever `configure` changes; no local handlers.
    static func forTests(
        on loop: EventLoop, mode: PolicyMode = .passthrough, configure: (inout GatewayConfig) -> Void = { _ in }
    ) -> Worker {
        var config = GatewayConfig(
            listeners: [], apps: [], upstreams: ["u": UpstreamConfig(endpoints: [])],
            routes: [RouteConfig(match: RouteMatch(kind: .prefix("/api/")), upstream: "u", mode: mode)])
        configure(&config)
        return Worker(
            eventLoop: loop, snapshot: GatewaySnapshot(config: config),
            hooks: GatewayHooks(makeLocalHandlers: { _ in [] }), logger: Logger(label: "test"))
    }
}
