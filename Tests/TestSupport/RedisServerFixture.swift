import Foundation

import AssertGateRedis

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A private `redis-server` for one test: a free loopback port, no
/// persistence, started with posix_spawn and stopped by its PID (SIGTERM,
/// SIGKILL after 5 s). Readiness is a PING answered on the port, polled with
/// a deadline (it is an external process). `command` talks RESP over a plain
/// blocking socket, independent of the client under test.
public final class RedisServerFixture: @unchecked Sendable {
    public enum FixtureError: Error, CustomStringConvertible {
        case binaryMissing(String)
        case spawnFailed(Int32)
        case notReady(Int)
        case noFreePort
        case commandFailed(String)
        public var description: String {
            switch self {
            case .binaryMissing(let p): return "\(p) not found: install redis-server (apt-get install redis-server)"
            case .spawnFailed(let e): return "posix_spawn redis-server failed: errno \(e)"
            case .notReady(let port): return "redis-server on 127.0.0.1:\(port) did not answer PING in time"
            case .noFreePort: return "no free loopback port"
            case .commandFailed(let s): return "command to redis-server failed: \(s)"
            }
        }
    }

    public static let serverPath = ProcessInfo.processInfo.environment["REDIS_SERVER"] ?? "/usr/bin/redis-server"

    /// A TLS listener next to the plain one (which the fixture's own
    /// commands and readiness check keep using).
    public struct TLS: Sendable {
        public var certificate: String
        public var privateKey: String
        /// CA that client certificates must chain to.
        public var caCertificate: String
        /// `tls-auth-clients yes` (Redis' default) or `no`.
        public var requireClientCertificate: Bool
        public init(certificate: String, privateKey: String, caCertificate: String, requireClientCertificate: Bool) {
            self.certificate = certificate
            self.privateKey = privateKey
            self.caCertificate = caCertificate
            self.requireClientCertificate = requireClientCertificate
        }
    }

    public private(set) var port: Int
    public let extraArguments: [String]
    public let tls: TLS?
    /// The TLS port, when started with `tls`.
    public private(set) var tlsPort: Int?
    /// The cluster bus port, when started with `cluster`: chosen free like the
    /// others, as Redis' default (port + 10000) may be taken or above 65535.
    public private(set) var clusterPort: Int?
    private let cluster: Bool
    private var pid: pid_t?

    public init(port: Int? = nil, extraArguments: [String] = [], tls: TLS? = nil, cluster: Bool = false) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.serverPath) else {
            throw FixtureError.binaryMissing(Self.serverPath)
        }
        self.extraArguments = extraArguments
        self.tls = tls
        self.cluster = cluster
        if let port {
            self.port = port
            if tls != nil { self.tlsPort = try Self.freePort() }
            if cluster { self.clusterPort = try Self.freePort() }
            try start()
            return
        }
        // The port found free can be taken (e.g. as an ephemeral client port)
        // before redis-server binds it: then try another.
        var attempt = 0
        while true {
            self.port = try Self.freePort()
            if tls != nil { self.tlsPort = try Self.freePort() }
            if cluster { self.clusterPort = try Self.freePort() }
            do {
                try start()
                return
            } catch FixtureError.notReady(let p) where attempt < 4 {
                _ = p
                attempt += 1
            }
        }
    }

    deinit {
        stop()
    }

    public var url: String { "redis://127.0.0.1:\(port)/0" }

    /// `rediss://` to the TLS port (nil without `tls`).
    public var tlsURL: String? { tlsPort.map { "rediss://127.0.0.1:\($0)/0" } }

    public func start() throws {
        guard pid == nil else { return }
        let args = [
            Self.serverPath, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--loglevel", "warning", "--logfile", "",
        ] + tlsArguments + clusterArguments + extraArguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // None of the test process's sockets or pipes: a server that held
        // them would keep a closed listener or a finished client's pipe open.
        SpawnedProcess.closeInheritedDescriptors(&actions)
        var cArgs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for a in cArgs { free(a) } }
        // The child must not inherit this process's blocked signals (test
        // runners and Dispatch block some): else SIGTERM stays pending and
        // every stop waits for the SIGKILL fallback.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        SpawnedProcess.defaultSignals(&attributes)
        var child: pid_t = 0
        let rc = posix_spawn(&child, Self.serverPath, &actions, &attributes, &cArgs, environ)
        guard rc == 0 else { throw FixtureError.spawnFailed(rc) }
        pid = child
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if Self.pingAnswered(port: port) {
                // The port was free when chosen, but another process (another
                // test run's redis-server) may have bound it since: then ours
                // exited with "address in use" and a stranger answers the PING.
                // Only our own PID counts as ready.
                if serverPID() == child { return }
                break
            }
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                pid = nil
                break
            }
            usleep(10_000)
        }
        stop()
        throw FixtureError.notReady(port)
    }

    private var tlsArguments: [String] {
        guard let tls, let tlsPort else { return [] }
        return [
            "--tls-port", String(tlsPort), "--tls-cert-file", tls.certificate, "--tls-key-file", tls.privateKey,
            "--tls-ca-cert-file", tls.caCertificate, "--tls-auth-clients", tls.requireClientCertificate ? "yes" : "no",
        ]
    }

    private var clusterArguments: [String] {
        guard cluster, let clusterPort else { return [] }
        return ["--cluster-enabled", "yes", "--cluster-port", String(clusterPort)]
    }

    /// `--requirepass` from `extraArguments`, if any.
    public var password: String? {
        guard let i = extraArguments.firstIndex(of: "--requirepass"), i + 1 < extraArguments.count else { return nil }
        return extraArguments[i + 1]
    }

    /// `process_id` from `INFO server` of whoever listens on `port`.
    private func serverPID() -> pid_t? {
        guard let info = (try? run(["INFO", "server"], password: password))?.string else { return nil }
        for line in info.split(whereSeparator: \.isNewline) where line.hasPrefix("process_id:") {
            return pid_t(line.dropFirst("process_id:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    public func stop() {
        guard let child = pid else { return }
        pid = nil
        kill(child, SIGCONT)
        kill(child, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<1000 {
            if waitpid(child, &status, WNOHANG) == child { return }
            usleep(5_000)
        }
        kill(child, SIGKILL)
        waitpid(child, &status, 0)
    }

    public func restart() throws {
        stop()
        try start()
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    public func pause() {
        if let pid { kill(pid, SIGSTOP) }
    }

    public func resume() {
        if let pid { kill(pid, SIGCONT) }
    }

    /// Sends one command (after AUTH `password` if given) and returns the reply.
    @discardableResult
    public func run(_ args: [String], password: String? = nil, database: Int = 0) throws -> RESPValue {
        let fd = try Self.connected(port: port, timeoutMicros: 2_000_000)
        defer { close(fd) }
        var commands: [RESPCommand] = []
        if let password { commands.append(RESPCommand("AUTH", .string(password))) }
        if database != 0 { commands.append(RESPCommand("SELECT", .integer(Int64(database)))) }
        commands.append(RESPCommand(args.map { RESPArgument.string($0) }))
        let reader = try RESPReader()
        var last: RESPValue = .null
        for c in commands {
            let bytes = Array(c.bytes.readableBytesView)
            guard send(fd, bytes, bytes.count, 0) == bytes.count else { throw FixtureError.commandFailed("send") }
            var reply: RESPValue?
            var buf = [UInt8](repeating: 0, count: 65536)
            while reply == nil {
                let n = recv(fd, &buf, buf.count, 0)
                guard n > 0 else { throw FixtureError.commandFailed("recv") }
                try buf.withUnsafeBytes { try reader.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                reply = try reader.next()
            }
            last = reply ?? .null
        }
        return last
    }

    /// `run` as text (bulk or status reply).
    @discardableResult
    public func text(_ args: String...) throws -> String {
        try run(args).string ?? ""
    }

    /// A port free now; released at once, so another process may take it
    /// before it is used (callers that start a server retry). For a port
    /// that must stay dead, hold a `ReservedPort`.
    public static func freePort() throws -> Int {
        try ReservedPort().port
    }

    private static func connected(port: Int, timeoutMicros: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FixtureError.commandFailed("socket") }
        var tv = timeval(tv_sec: timeoutMicros / 1_000_000, tv_usec: timeoutMicros % 1_000_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw FixtureError.commandFailed("connect")
        }
        return fd
    }

    /// One PING with a 200 ms receive timeout; any reply means the server is up
    /// (with requirepass it answers -NOAUTH).
    public static func pingAnswered(port: Int) -> Bool {
        guard let fd = try? connected(port: port, timeoutMicros: 200_000) else { return false }
        defer { close(fd) }
        let ping = Array("PING\r\n".utf8)
        guard send(fd, ping, ping.count, 0) == ping.count else { return false }
        var buf = [UInt8](repeating: 0, count: 16)
        let n = recv(fd, &buf, buf.count, 0)
        return n > 0 && (buf[0] == UInt8(ascii: "+") || buf[0] == UInt8(ascii: "-"))
    }
}
