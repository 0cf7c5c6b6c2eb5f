import AssertGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The quickstart's failure path as a user meets it: another socket holds the
/// gateway's port. The run must stop with the end of the gateway's log (whose
/// bind error names the address), the address with the variable that moves
/// it, and leave nothing it started running. QUICKSTART_BIN makes it skip the
/// package check and the release build and use this test build's binaries,
/// so the run takes seconds.
@Suite struct QuickstartFailureTests {
    /// Loopback ports free at the time of the call (bound together, so distinct).
    static func freePorts(_ count: Int) throws -> [Int] {
        let held = try (0..<count).map { _ in try ReservedPort() }
        return held.map(\.port)
    }

    /// True while `pid` is a live process (a zombie awaiting its reaper counts as stopped).
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(close, offsetBy: 2)...].prefix(1)
        return state != "Z" && state != "X"
    }

    /// The PIDs of "started NAME (pid N)" lines.
    static func startedPIDs(_ output: String) -> [String: Int32] {
        var pids: [String: Int32] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("started ") {
            let words = line.split(separator: " ")
            guard words.count >= 4, let pid = Int32(words[3].trimmingCharacters(in: CharacterSet(charactersIn: "),")))
            else { continue }
            pids[String(words[1])] = pid
        }
        return pids
    }

    @Test func aTakenGatewayPortStopsTheRunAndEverythingItStarted() throws {
        let bin = PackagePaths.productsDirectory
        for exe in ["assertgate", "assertgate-device"] {
            try #require(
                FileManager.default.isExecutableFile(atPath: bin + "/" + exe),
                "\(exe) not built in \(bin): swift build --build-tests builds it")
        }
        let run = try TempDir()
        defer { run.remove() }
        // Bound and never listening: nothing answers on it, and the gateway's bind fails.
        let taken = try ReservedPort()
        let ports = try Self.freePorts(4)
        var environment = ProcessInfo.processInfo.environment
        environment["QUICKSTART_BIN"] = bin
        environment["QUICKSTART_RUN"] = run.path
        environment["GATEWAY_PORT"] = String(taken.port)
        environment["ADMIN_PORT"] = String(ports[0])
        environment["UPSTREAM_PORT"] = String(ports[1])
        environment["REDIS_PORT"] = String(ports[2])
        environment["APPLE_MOCK_PORT"] = String(ports[3])
        environment["READY_SECONDS"] = "30"

        // The test runner's threads block SIGTERM, and a child inherits the
        // mask: run the script with none blocked, as from a terminal, so its
        // services stop on TERM (not on the KILL 5 s later) as they would for a user.
        let unblocked = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execvp(sys.argv[1], sys.argv[1:])"
        let result = try Subprocess.run(
            "/usr/bin/timeout",
            ["-k", "5", "120", "python3", "-c", unblocked, "bash", PackagePaths.root + "/deploy/quickstart.sh"],
            environment: environment)
        let output = result.stdout + result.stderr

        #expect(result.status == 1, "\(output)")
        #expect(result.stderr.contains("FAILED: gateway exited before it was ready."), "\(output)")
        // The end of the gateway's log: its own error names the address.
        #expect(
            result.stderr.contains("cannot listen on 127.0.0.1:\(taken.port): the address is already in use"),
            "\(output)")
        // The addresses, with the variables that move them, and how to use them.
        #expect(result.stderr.contains("127.0.0.1:\(taken.port) (GATEWAY_PORT)"), "\(output)")
        #expect(result.stderr.contains("127.0.0.1:\(ports[0]) (ADMIN_PORT)"), "\(output)")
        #expect(result.stderr.contains("GATEWAY_PORT=<free port> ADMIN_PORT=<free port> deploy/quickstart.sh"), "\(output)")

        // Redis, the upstream and the Apple mock had started; all were stopped, and the gateway is not running.
        let started = Self.startedPIDs(result.stdout)
        #expect(Set(started.keys) == ["redis", "upstream", "apple-mock", "gateway"], "\(output)")
        for (name, pid) in started {
            #expect(!Self.isRunning(pid), "\(name) (pid \(pid)) is still running")
        }
        #expect(result.stderr.contains("stopped redis (pid \(started["redis"] ?? -1))"), "\(output)")
        #expect(result.stderr.contains("stopped upstream (pid \(started["upstream"] ?? -1))"), "\(output)")
        #expect(result.stderr.contains("stopped apple-mock (pid \(started["apple-mock"] ?? -1))"), "\(output)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: run.path).filter { $0.hasSuffix(".pid") }
        #expect(leftovers.isEmpty, "pid files left: \(leftovers)")
        // Nothing answers on the ports the run used any more.
        for port in [ports[1], ports[2], ports[3]] {
            let probe = try Subprocess.run("/usr/bin/timeout", ["5", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"])
            #expect(probe.status != 0, "something still listens on 127.0.0.1:\(port)")
        }
    }
}
