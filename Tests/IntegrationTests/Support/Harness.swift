import AssertGateTestSupport
import AssertGateCore
import Foundation
import Logging
import NIOCore
import NIOPosix

/// A gateway in this process in front of a `TestUpstream`.
struct Harness {
    let upstream: TestUpstream
    let gateway: Gateway
    let group: MultiThreadedEventLoopGroup
    let port: Int

    static func start(
        upstreamEndpoints: [UpstreamEndpoint]? = nil, responseTimeout: TimeAmount = .seconds(10), threads: Int = 2, hooks: GatewayHooks = GatewayHooks(),
        configure: (inout GatewayConfig) -> Void = { _ in }
    ) async throws -> Harness {
        let upstream = try await TestUpstream()
        var up = UpstreamConfig(endpoints: upstreamEndpoints ?? [UpstreamEndpoint(host: "127.0.0.1", port: upstream.port)])
        up.responseTimeout = responseTimeout
        up.connectTimeout = .seconds(2)
        var config = GatewayConfig(
            listeners: [ListenerConfig(address: HostPort(host: "127.0.0.1", port: 0))],
            apps: [AppConfig(appId: "ABCDE12345.com.example.app")],
            upstreams: ["legacy": up],
            routes: [RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "legacy", mode: .passthrough)])
        config.limits.maxRequestBodyBytes = 512 << 20
        configure(&config)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        var logger = Logger(label: "assertgate.test")
        logger.logLevel = .warning
        let gateway = Gateway(snapshot: try GatewaySnapshot.build(config: config), group: group, logger: logger, hooks: hooks)
        let ports = try await gateway.start()
        return Harness(upstream: upstream, gateway: gateway, group: group, port: ports.first ?? 0)
    }

    func stop() async throws {
        await gateway.shutdown(deadline: .now() + .seconds(2))
        try await group.shutdownGracefully()
        try await upstream.stop()
    }

    var base: String { "http://127.0.0.1:\(port)" }
}

/// Resident set size of this process (KiB), and the peak since `resetPeak()`.
enum Memory {
    static func field(_ name: String) -> Int {
        guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
        for line in s.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.split(separator: " ").dropFirst().first { !$0.isEmpty }.map(String.init) ?? "") ?? -1
        }
        return -1
    }
    static var rssKiB: Int { field("VmRSS") }
    static var peakKiB: Int { field("VmHWM") }
    static func resetPeak() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }
}
