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
        let gateway = Gateway(config: config, group: group, logger: logger, hooks: hooks)
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

/// Runs an external client (curl, nghttp, h2load, python) to completion.
struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum Run {
    static func which(_ tool: String) -> String? {
        if tool.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: tool) ? tool : nil }
        for dir in ["/usr/bin", "/usr/local/bin", "/bin"] {
            let p = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }

    static func tool(_ name: String, _ args: [String], stdin: FileHandle? = nil, timeout: TimeInterval = 60) async throws
        -> ProcessResult
    {
        guard let path = which(name), let timeoutPath = which("timeout") else { throw ToolMissing(name: name) }
        // Output goes to files and the exit is awaited through the termination
        // handler: no thread of the (two-thread) cooperative pool ever blocks on
        // a child, so an in-process gateway that answers through Swift
        // concurrency (the admin listener) can always make progress.
        let tag = UUID().uuidString
        let outPath = NSTemporaryDirectory() + "assertgate-run-\(tag).out"
        let errPath = NSTemporaryDirectory() + "assertgate-run-\(tag).err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        defer {
            try? out.close()
            try? err.close()
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: timeoutPath)
        // `timeout` bounds every external client; SIGKILL 5 s after SIGTERM.
        p.arguments = ["-k", "5", String(Int(timeout)), path] + args
        p.standardOutput = out
        p.standardError = err
        p.standardInput = stdin ?? FileHandle(forReadingAtPath: "/dev/null")
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            p.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try p.run()
            } catch {
                p.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        return ProcessResult(
            status: status, stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}

struct ToolMissing: Error, CustomStringConvertible {
    var name: String
    var description: String { "required tool \(name) is not installed" }
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
