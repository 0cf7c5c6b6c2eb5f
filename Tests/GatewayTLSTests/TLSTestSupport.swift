import AssertGateTestSupport
import GatewayTLS
import Foundation
import NIOCore
import NIOPosix
import Testing

/// Shared fixtures for the TLS tests: throw-away certificates made with the
/// `openssl` CLI, a loopback NIO server with the TLS handler in front, and
/// subprocess clients (curl, openssl s_client) with deadlines.
enum TLSTestSupport {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A temporary directory removed when the value is released by the test.
    final class TemporaryDirectory: Sendable {
        let url: URL

        init() throws {
            self.url = FileManager.default.temporaryDirectory
                .appendingPathComponent("assertgate-tls-\(UUID().uuidString)", isDirectory: true)
            try FileManager.default.createDirectory(at: self.url, withIntermediateDirectories: true)
        }

        func path(_ name: String) -> String {
            self.url.appendingPathComponent(name).path
        }

        deinit {
            try? FileManager.default.removeItem(at: self.url)
        }
    }

    enum KeyType {
        case p256
        case rsa2048

        var newkeyArguments: [String] {
            switch self {
            case .p256: return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
            case .rsa2048: return ["-newkey", "rsa:2048"]
            }
        }
    }

    /// Generates a self-signed certificate for 127.0.0.1 / localhost.
    static func makeCertificate(
        in directory: TemporaryDirectory,
        name: String = "server",
        keyType: KeyType = .p256
    ) async throws -> (certificate: String, key: String) {
        let certificate = directory.path("\(name).crt")
        let key = directory.path("\(name).key")
        let result = try await run(
            "openssl",
            ["req", "-x509"] + keyType.newkeyArguments + [
                "-nodes", "-keyout", key, "-out", certificate, "-days", "1",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            ])
        guard result.status == 0 else {
            throw Failure(description: "openssl req failed (\(result.status)): \(result.stderr)")
        }
        return (certificate, key)
    }

    /// Runs a tool through the shared `Run.tool` (bounded by `timeout`) with
    /// stdin from `stdinFile` (or /dev/null).
    static func run(
        _ executable: String,
        _ arguments: [String],
        stdinFile: String? = nil,
        timeout: Double = 60
    ) async throws -> AssertGateTestSupport.ProcessResult {
        let stdin = try stdinFile.map { try FileHandle(forReadingFrom: URL(fileURLWithPath: $0)) }
        defer { try? stdin?.close() }
        return try await Run.tool(executable, arguments, stdin: stdin, timeout: timeout)
    }

    /// Deterministic pseudo-random payload (no RNG: failures must reproduce).
    static func payload(count: Int, seed: UInt64 = 0x5EED) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var state = seed
        bytes.withUnsafeMutableBytes { buffer in
            var index = 0
            while index < buffer.count {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                var word = state ^ (state >> 29)
                let end = min(index + 8, buffer.count)
                while index < end {
                    buffer[index] = UInt8(truncatingIfNeeded: word)
                    word >>= 8
                    index += 1
                }
            }
        }
        return bytes
    }

    /// FNV-1a 64: a checksum both sides compute over streamed bytes.
    struct Checksum: Sendable, Equatable {
        private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325
        private(set) var count = 0

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            // Raw-pointer loop: tests run unoptimised and hash 20 MiB.
            var value = self.value
            for byte in bytes {
                value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            }
            self.value = value
            self.count += bytes.count
        }

        mutating func update(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { self.update($0) }
        }

        mutating func update(_ data: Data) {
            data.withUnsafeBytes { self.update($0) }
        }

        mutating func update(_ buffer: ByteBuffer) {
            buffer.withUnsafeReadableBytes { self.update($0) }
        }

        var hex: String { String(self.value, radix: 16) }
    }

    /// Awaits `operation`, failing after `seconds`.
    static func withDeadline<T: Sendable>(
        _ seconds: Double,
        _ what: String,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw Failure(description: "timed out after \(seconds)s waiting for \(what)")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else {
                throw Failure(description: "no result for \(what)")
            }
            return first
        }
    }
}

/// What the server-side test handlers report, in order.
enum ServerEvent: Sendable, Equatable {
    case handshake(alpn: String?)
    case received(String)
    case http2Preface
    case upload(bytes: Int, checksum: String)
    case bodyWritten(bytes: Int)
    case closed
}

/// A stream of `ServerEvent`s that tests consume with deadlines.
final class ServerEvents: Sendable {
    let stream: AsyncStream<ServerEvent>
    let continuation: AsyncStream<ServerEvent>.Continuation

    init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(of: ServerEvent.self)
    }

    func yield(_ event: ServerEvent) {
        self.continuation.yield(event)
    }

    /// Waits for the first event matching `predicate`, skipping others.
    func next(
        within seconds: Double = 30,
        _ what: String,
        where predicate: @escaping @Sendable (ServerEvent) -> Bool
    ) async throws -> ServerEvent {
        let stream = self.stream
        return try await TLSTestSupport.withDeadline(seconds, what) {
            for await event in stream where predicate(event) {
                return event
            }
            throw TLSTestSupport.Failure(description: "event stream ended before \(what)")
        }
    }
}

/// A NIOPosix server on 127.0.0.1:0 with `OpenSSLHandler` first.
final class TLSTestServer: Sendable {
    let group: MultiThreadedEventLoopGroup
    let channel: any Channel
    let port: Int

    init(
        context: TLSServerContext,
        autoRead: Bool = true,
        application: @escaping @Sendable () -> any ChannelHandler
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.autoRead, value: autoRead)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(OpenSSLHandler(context: context))
                        try channel.pipeline.syncOperations.addHandler(application())
                    }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
            guard let port = channel.localAddress?.port else {
                throw TLSTestSupport.Failure(description: "server has no port")
            }
            self.group = group
            self.channel = channel
            self.port = port
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Runs `body` against a fresh server and always stops it afterwards.
    static func with(
        context: TLSServerContext,
        autoRead: Bool = true,
        application: @escaping @Sendable () -> any ChannelHandler,
        _ body: (TLSTestServer) async throws -> Void
    ) async throws {
        let server = try await TLSTestServer(context: context, autoRead: autoRead, application: application)
        do {
            try await body(server)
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    func stop() async throws {
        try await self.channel.close().get()
        try await self.group.shutdownGracefully()
    }
}
