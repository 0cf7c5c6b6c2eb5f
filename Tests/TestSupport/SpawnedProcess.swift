import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An external server for one test (nghttpd, the gRPC echo server), started
/// with posix_spawn like `RedisServerFixture`: stdout and stderr go to files
/// (read for its "ready" line and for error messages), stdin is a pipe this
/// object holds, so a server that reads it sees EOF if the test process dies.
/// Stopped by its PID: SIGTERM, SIGKILL after 5 s.
public final class SpawnedProcess: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let executable: String
    public let pid: pid_t
    private let directory: String
    /// Guards `stdinWrite` and `exitStatus` (a test may stop from a defer
    /// while another task asks `hasExited`).
    private let lock = NSLock()
    private var stdinWrite: Int32
    private var exitStatus: Int32?

    public var stdoutPath: String { directory + "/stdout" }
    public var stderrPath: String { directory + "/stderr" }

    public init(executable: String, arguments: [String], environment: [String: String]? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw Failure(description: "\(executable) is not installed or not executable")
        }
        self.executable = executable
        directory = NSTemporaryDirectory() + "assertgate-proc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var fds: [Int32] = [0, 0]
        // pipe2 is not visible from Swift's Glibc: pipe, then CLOEXEC, so
        // other children never inherit (and hold open) the write end.
        guard pipe(&fds) == 0 else { throw Failure(description: "pipe: errno \(errno)") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears CLOEXEC on the child's fd 0; the write end stays here.
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, directory + "/stdout", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, directory + "/stderr", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // Nothing else of this process's: a listening socket or connection
        // of the test (or of a gateway in it) held open by the child would
        // outlive its owner, and would pass for the child's own in
        // `listeningPorts()`.
        Self.closeInheritedDescriptors(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        Self.defaultSignals(&attributes)
        var cArgs: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for a in cArgs { free(a) } }
        var env: [String] = []
        for (key, value) in (environment ?? ProcessInfo.processInfo.environment).sorted(by: { $0.key < $1.key }) {
            env.append("\(key)=\(value)")
        }
        var cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { for e in cEnv { free(e) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, &cArgs, &cEnv)
        close(fds[0])
        guard rc == 0 else {
            close(fds[1])
            throw Failure(description: "posix_spawn \(executable) failed: errno \(rc)")
        }
        pid = child
        stdinWrite = fds[1]
    }

    /// A child with posix_spawn, as `init` starts one, for `Run.tool`:
    /// stdin from `stdinDescriptor` (else /dev/null), stdout and stderr to
    /// files, nothing else of this process's, default signal handling, this
    /// process's environment. Reap it with `exitStatus(of:)`.
    static func spawn(
        executable: String, arguments: [String], stdinDescriptor: Int32?, stdoutPath: String, stderrPath: String
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdinDescriptor {
            posix_spawn_file_actions_adddup2(&actions, stdinDescriptor, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        closeInheritedDescriptors(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        defaultSignals(&attributes)
        var cArgs: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for a in cArgs { free(a) } }
        var cEnv: [UnsafeMutablePointer<CChar>?] =
            ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for e in cEnv { free(e) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, &cArgs, &cEnv)
        guard rc == 0 else { throw Failure(description: "posix_spawn \(executable) failed: errno \(rc)") }
        return child
    }

    /// Waits for `pid` on a thread of its own: its exit code, or the signal
    /// that ended it (as Foundation's `terminationStatus` reports one).
    static func exitStatus(of pid: pid_t) async -> Int32 {
        await withCheckedContinuation { continuation in
            let waiter = Thread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1, errno == EINTR {}
                let signal = status & 0x7f
                continuation.resume(returning: signal == 0 ? (status >> 8) & 0xff : signal)
            }
            waiter.start()
        }
    }

    /// As in RedisServerFixture: the child must not inherit the blocked
    /// signals of the test runner, or SIGTERM would stay pending.
    static func defaultSignals(_ attributes: inout posix_spawnattr_t) {
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGTERM)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's posix_spawn_file_actions_addclosefrom_np (2.34+; Swift's
    /// Glibc module does not declare it), else a close action per open
    /// descriptor above 2 (one that closes in the meantime is ignored).
    static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            let addCloseFrom = unsafeBitCast(symbol, to: AddCloseFrom.self)
            if addCloseFrom(&actions, 3) == 0 { return }
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap({ Int32($0) }) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    public var output: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    public var errors: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// True once the process has exited (it is reaped here).
    public var hasExited: Bool {
        lock.withLock {
            if exitStatus != nil { return true }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                exitStatus = status
                return true
            }
            return false
        }
    }

    /// Polls (an external process: no other way to hear from it) until
    /// `ready` returns a value, the process exits, or `timeout` passes.
    public func wait<T>(for what: String, timeout: TimeInterval = 20, _ ready: () -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let value = ready() { return value }
            if hasExited {
                throw Failure(description: "\(executable) exited before \(what); stderr: \(errors.suffix(2000))")
            }
            usleep(10_000)
        }
        if let value = ready() { return value }
        throw Failure(description: "\(executable) did not show \(what) within \(Int(timeout)) s; stderr: \(errors.suffix(2000))")
    }

    /// The rest of the first stdout line that starts with `prefix`.
    public func waitForLine(prefix: String, timeout: TimeInterval = 20) throws -> String {
        try wait(for: "a line starting with \"\(prefix)\"", timeout: timeout) {
            output.split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
        }
    }

    /// The TCP ports this process listens on (its socket inodes matched
    /// against /proc/net/tcp's LISTEN rows): how a server started on port 0
    /// is found without racing another process for a port chosen here.
    public func listeningPorts() -> [Int] {
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return [] }
        var inodes = Set<String>()
        for fd in fds {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                target.hasPrefix("socket:[")
            else { continue }
            inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
        }
        guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return [] }
        var ports: [Int] = []
        for line in table.split(separator: "\n").dropFirst() {
            let f = line.split(separator: " ")
            // local_address rem_address st ... inode is the tenth field.
            guard f.count > 9, f[3] == "0A", inodes.contains(String(f[9])),
                let colon = f[1].lastIndex(of: ":"), let port = Int(f[1][f[1].index(after: colon)...], radix: 16)
            else { continue }
            ports.append(port)
        }
        return ports.sorted()
    }

    /// Freezes the process (SIGSTOP): its sockets stay open, nothing answers.
    public func pause() { kill(pid, SIGSTOP) }
    public func resume() { kill(pid, SIGCONT) }

    public func stop() {
        lock.withLock {
            if stdinWrite >= 0 {
                close(stdinWrite)
                stdinWrite = -1
            }
        }
        guard !hasExited else { return }
        kill(pid, SIGCONT)
        kill(pid, SIGTERM)
        for _ in 0..<1000 {
            if hasExited { return }
            usleep(5_000)
        }
        kill(pid, SIGKILL)
        lock.withLock {
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            exitStatus = status
        }
    }
}
