import AssertGateCore
import AssertGateRedis
import Foundation
import GatewayTLS
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// store-bench: assertion commits per second through `RedisStore` (one event
/// loop, one connection, N commits in flight) against `redis-benchmark`
/// running the SAME commit script with EVALSHA and the same pipelining
/// (`-c 1 -P N`), alternated for several rounds on a private redis-server.
///
///   swift build -c release --product store-bench
///   .build/release/store-bench [--inflight 16] [--seconds 5] [--rounds 3] [--keys 100000] [--tls DIR]
///
/// `--tls DIR` (ca.crt, server.crt/.key, client.crt/.key, as
/// `Benchmarks/make-pki.sh DIR` writes them): both sides talk TLS to the
/// server's TLS port with a client certificate — `rediss://` for ours,
/// `redis-benchmark --tls` for theirs.
///
/// `--cluster`: the server runs with `--cluster-enabled yes` and serves every
/// slot (a one-master cluster), and each round adds a third run: the same
/// commits through `RedisClusterClient` (slot per command, map lookup,
/// redirect checks), so its cost shows against the plain client on the same
/// node in the same round.
@main
struct StoreBench {
    struct Options {
        var inflight = 16
        var seconds = 5
        var rounds = 3
        var keys = 100_000
        var redisServer = "/usr/bin/redis-server"
        var redisBenchmark = "/usr/bin/redis-benchmark"
        var tlsDirectory: String?
        var cluster = false
    }

    static func parse() -> Options {
        var o = Options()
        var args = CommandLine.arguments.dropFirst()
        while let a = args.popFirst() {
            switch a {
            case "--cluster":
                o.cluster = true
                continue
            case "--help", "-h":
                print(usageText)
                exit(0)
            default:
                break
            }
            // A value that is missing or not a positive number is a usage
            // error, not a silent default.
            guard let v = args.popFirst() else { usage() }
            func count() -> Int {
                guard let n = Int(v), n > 0 else { usage() }
                return n
            }
            switch a {
            case "--inflight": o.inflight = count()
            case "--seconds": o.seconds = count()
            case "--rounds": o.rounds = count()
            case "--keys": o.keys = count()
            case "--redis-server": o.redisServer = v
            case "--redis-benchmark": o.redisBenchmark = v
            case "--tls": o.tlsDirectory = v
            default: usage()
            }
        }
        return o
    }

    static let usageText = """
        usage: store-bench [--inflight N] [--seconds S] [--rounds R] [--keys K] [--tls DIR] [--cluster]
                           [--redis-server PATH] [--redis-benchmark PATH]
        """

    static func usage() -> Never {
        FileHandle.standardError.write(Data((usageText + "\n").utf8))
        exit(2)
    }

    static func main() async throws {
        let o = parse()
        let server = try BenchRedisServer(path: o.redisServer, tlsDirectory: o.tlsDirectory, cluster: o.cluster)
        defer { server.stop() }
        print("redis-server pid \(server.pid) on 127.0.0.1:\(server.port)"
            + (server.tlsPort.map { ", TLS on :\($0) (client certificate required)" } ?? ""))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        var config = RedisClientConfiguration(
            url: RedisURL(host: "127.0.0.1", port: server.tlsPort ?? server.port, tls: server.tlsPort != nil),
            connectTimeout: .seconds(2), commandTimeout: .seconds(5), connections: 1)
        if let dir = o.tlsDirectory {
            config.tls = try TLSClientContext(
                caFile: dir + "/ca.crt", certificatePath: dir + "/client.crt", privateKeyPath: dir + "/client.key")
        }
        let client = RedisClient(configuration: config, eventLoop: loop, scripts: RedisStore.scripts)
        let store = RedisStore(redis: client)
        let sha = RedisStore.commitScriptSHA1
        var clusterStore: RedisStore?
        if o.cluster {
            clusterStore = try await makeOneNodeCluster(client: client, config: config, port: server.tlsPort ?? server.port)
        }

        // Key ids for our side, and the same number of keys for redis-benchmark's
        // `ag:{__rand_int__}:key` names (12-digit numbers < --keys), counter 0.
        let keys = try await populate(store: store, count: o.keys)
        let populateBench = """
            for i = 0, tonumber(ARGV[1]) - 1 do
              redis.call('HSET', string.format('ag:{%012d}:key', i), 'cnt', '0', 'rev', '0', 'env', 'production', 'app', 'T.b', 'created', '0')
            end
            return 1
            """
        _ = try await client.send("EVAL", .string(populateBench), "0", .integer(Int64(o.keys))).get()
        print("populated \(o.keys) keys for each side; commit script sha \(sha)")

        var ours: [Double] = []
        var theirs: [Double] = []
        var clusterRatios: [Double] = []
        for round in 1...o.rounds {
            if let clusterStore {
                _ = try await client.send("CONFIG", "RESETSTAT").get()
                let c = try await runOurs(store: clusterStore, keys: keys, inflight: o.inflight, seconds: o.seconds)
                let stats = try await client.send("INFO", "commandstats").get().string ?? ""
                let evalsha = commandCalls(stats, "evalsha")
                print(String(format: "round %d  RedisStore on RedisClusterClient %10.0f commits/s  (%d commits, %d errors; evalsha calls=%d → %@)",
                    round, c.rate, c.total, c.errors, evalsha, evalsha == c.total ? "one EVALSHA per commit" : "MISMATCH" as NSString))
                clusterRatios.append(c.rate)
            }
            _ = try await client.send("CONFIG", "RESETSTAT").get()
            let r = try await runOurs(store: store, keys: keys, inflight: o.inflight, seconds: o.seconds)
            let stats = try await client.send("INFO", "commandstats").get().string ?? ""
            let evalsha = commandCalls(stats, "evalsha")
            let hmget = commandCalls(stats, "hmget")
            print(String(format: "round %d  RedisStore    %10.0f commits/s  (%d commits incl. warm-up, %d errors; INFO commandstats: evalsha calls=%d, hmget calls=%d → %@)",
                round, r.rate, r.total, r.errors, evalsha, hmget,
                evalsha == r.total && hmget == r.total ? "exactly one EVALSHA per commit" : "MISMATCH" as NSString))
            ours.append(r.rate)
            if o.cluster, let c = clusterRatios.popLast() {
                clusterRatios.append(c / r.rate)
                print(String(format: "round %d  cluster client ÷ plain client %.2f", round, c / r.rate))
            }
            let n = max(100_000, Int(r.rate * Double(o.seconds)))
            let rb = try runRedisBenchmark(
                path: o.redisBenchmark, port: server.tlsPort ?? server.port, tls: Self.redisBenchmarkTLS(o.tlsDirectory),
                sha: sha, inflight: o.inflight, requests: n, keys: o.keys)
            print(String(format: "round %d  redis-benchmark %8.0f req/s      (-c 1 -P %d -n %d -r %d EVALSHA)  round ratio %.2f",
                round, rb, o.inflight, n, o.keys, r.rate / rb))
            theirs.append(rb)
        }
        let mo = median(ours)
        let mt = median(theirs)
        // Each round's pair ran back to back: the median of the per-round
        // ratios is the figure least moved by the host's drift.
        let ratios = zip(ours, theirs).map { $0 / $1 }
        print(String(format: "\nmedian of %d rounds: RedisStore %.0f commits/s, redis-benchmark %.0f req/s, ratio %.2f; median of the round ratios %.2f (goal ≥ 0.80)",
            o.rounds, mo, mt, mo / mt, median(ratios)))
        print("redis-benchmark command: \(o.redisBenchmark) -h 127.0.0.1 -p \(server.tlsPort ?? server.port) "
            + Self.redisBenchmarkTLS(o.tlsDirectory).map { "\($0) " }.joined()
            + "-c 1 -P \(o.inflight) -n N -r \(o.keys) --csv EVALSHA \(sha) 1 'ag:{__rand_int__}:key' __rand_int__")
        if o.cluster {
            print(String(format: "cluster client ÷ plain client, median of the round ratios: %.2f", median(clusterRatios)))
        }
        try await clusterStore?.shutdown().get()
        try await store.shutdown().get()
        try await group.shutdownGracefully()
    }

    /// Gives the one node every slot, waits for `cluster_state:ok` (polled:
    /// the node needs a moment after start), and returns a store on a
    /// cluster client seeded with it.
    static func makeOneNodeCluster(client: RedisClient, config: RedisClientConfiguration, port: Int) async throws -> RedisStore {
        let added = try await client.send("CLUSTER", "ADDSLOTSRANGE", "0", "16383").get()
        guard case .status("OK") = added else { throw BenchError.clusterSetup("\(added)") }
        let deadline = Date().addingTimeInterval(30)
        while !(try await client.send("CLUSTER", "INFO").get().string ?? "").contains("cluster_state:ok") {
            guard Date() < deadline else { throw BenchError.clusterSetup("cluster_state not ok within 30 s") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let cluster = RedisClusterClient(
            configuration: config, seeds: [RedisNodeAddress(host: "127.0.0.1", port: port)], eventLoop: client.eventLoop,
            scripts: RedisStore.scripts)
        let store = RedisStore(redis: cluster)
        try await store.ping().get()
        return store
    }

    static func redisBenchmarkTLS(_ dir: String?) -> [String] {
        guard let dir else { return [] }
        return ["--tls", "--cacert", dir + "/ca.crt", "--cert", dir + "/client.crt", "--key", dir + "/client.key"]
    }

    static func median(_ v: [Double]) -> Double {
        let s = v.sorted()
        return s.isEmpty ? 0 : s[s.count / 2]
    }

    static func commandCalls(_ stats: String, _ name: String) -> Int {
        for line in stats.split(whereSeparator: \.isNewline) where line.hasPrefix("cmdstat_\(name):calls=") {
            let n = line.dropFirst("cmdstat_\(name):calls=".count).prefix { $0 != "," }
            return Int(n) ?? -1
        }
        return 0
    }

    /// Registers `count` keys through the store API (issue challenge + register), pipelined in batches.
    static func populate(store: RedisStore, count: Int) async throws -> [[UInt8]] {
        let keys = (0..<count).map { BenchDriver.keyId($0) }
        let batch = 2000
        var i = 0
        while i < count {
            let slice = keys[i..<min(count, i + batch)]
            let futures = slice.map { keyId -> EventLoopFuture<RegisterResult> in
                let c = StoreChallenge.generate()
                let record = NewKeyRecord(
                    keyId: keyId, publicKey: [0x04] + Array(repeating: 7, count: 64), appId: "T.b",
                    environment: .production, createdAt: 0)
                return store.issueChallenge(keyId: keyId, purpose: .attest, challenge: c, ttl: .seconds(60))
                    .flatMap { store.registerKey(record, attestChallenge: c) }
            }
            for f in futures {
                guard case .registered = try await f.get() else { throw BenchError.populateFailed }
            }
            i += batch
        }
        return keys
    }

    struct OurResult {
        var rate: Double
        var total: Int
        var errors: Int
    }

    /// One warm-up second, then `seconds` measured; the counters are read on the loop.
    static func runOurs(store: RedisStore, keys: [[UInt8]], inflight: Int, seconds: Int) async throws -> OurResult {
        let loop = store.eventLoop
        let driver = try await loop.submit { BenchDriver(store: store, keys: keys) }.get()
        let done = loop.makePromise(of: Void.self)
        try await loop.submit { driver.start(inflight: inflight, done: done) }.get()
        try await Task.sleep(for: .seconds(1))
        let (c0, t0) = try await loop.submit { (driver.completed, NIODeadline.now()) }.get()
        try await Task.sleep(for: .seconds(seconds))
        let (c1, t1) = try await loop.submit { (driver.completed, NIODeadline.now()) }.get()
        try await loop.submit { driver.running = false }.get()
        try await done.futureResult.get()
        let total = try await loop.submit { driver.completed + driver.errors }.get()
        let errors = try await loop.submit { driver.errors }.get()
        let rate = Double(c1 - c0) / (Double((t1 - t0).nanoseconds) / 1e9)
        return OurResult(rate: rate, total: total, errors: errors)
    }

    static func runRedisBenchmark(
        path: String, port: Int, tls: [String], sha: String, inflight: Int, requests: Int, keys: Int
    ) throws -> Double {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = ["-h", "127.0.0.1", "-p", String(port)] + tls + [
            "-c", "1", "-P", String(inflight), "-n", String(requests),
            "-r", String(keys), "--csv", "EVALSHA", sha, "1", "ag:{__rand_int__}:key", "__rand_int__",
        ]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard let line = text.split(whereSeparator: \.isNewline).last(where: { !$0.hasPrefix("\"test\"") }) else {
            throw BenchError.redisBenchmarkOutput(text)
        }
        let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        guard fields.count > 1, let rps = Double(fields[1]) else { throw BenchError.redisBenchmarkOutput(text) }
        return rps
    }

    enum BenchError: Error {
        case populateFailed
        case redisBenchmarkOutput(String)
        case serverDidNotStart
        case clusterSetup(String)
    }
}

/// Keeps `inflight` commits outstanding on one loop; confined to that loop.
final class BenchDriver: @unchecked Sendable {
    let store: RedisStore
    let keyCount: Int
    var completed = 0
    var errors = 0
    var running = true
    private var outstanding = 0
    private var done: EventLoopPromise<Void>?
    private var state: UInt64 = 0x9E37_79B9_7F4A_7C15

    init(store: RedisStore, keys: [[UInt8]]) {
        self.store = store
        self.keyCount = keys.count
    }

    /// Key id number `i`, computed rather than looked up (splitmix64 of i,
    /// four words): picking a random key then costs no trip to a 100,000-entry
    /// table (a cache miss per commit that the harness, not the client, would
    /// pay), just as redis-benchmark's `__rand_int__` is a computed number.
    static func keyId(_ i: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var x = UInt64(truncatingIfNeeded: i)
        for word in 0..<4 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            for b in 0..<8 { out[word * 8 + b] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(b))) }
        }
        return out
    }

    /// xorshift64*: cheap enough not to show in the measurement.
    private func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }

    func start(inflight: Int, done: EventLoopPromise<Void>) {
        self.done = done
        for _ in 0..<inflight {
            outstanding += 1
            issue()
        }
    }

    private func issue() {
        guard running else {
            outstanding -= 1
            if outstanding == 0 { done?.succeed() }
            return
        }
        let r = next()
        let key = Self.keyId(Int(r % UInt64(keyCount)))
        let counter = UInt32((r >> 32) % 100_000)
        store.commitAssertion(keyId: key, counter: counter, challenge: nil) { result in
            switch result {
            case .success: self.completed += 1
            case .failure: self.errors += 1
            }
            self.issue()
        }
    }
}

/// A private redis-server, started with posix_spawn and stopped by PID.
final class BenchRedisServer {
    let pid: pid_t
    let port: Int
    /// With a TLS directory: the TLS port (the plain one stays for readiness).
    let tlsPort: Int?

    /// `--cluster`: the node's directory (its nodes.conf), removed at stop.
    private(set) var clusterDirectory: String?

    init(path: String, tlsDirectory: String? = nil, cluster: Bool = false) throws {
        var lastPort = 0
        for _ in 0..<5 {
            let port = Int.random(in: 20000...40000)
            lastPort = port
            let tlsPort = tlsDirectory.map { _ in port + 1 }
            var args = [path, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning"]
            if cluster {
                let dir = NSTemporaryDirectory() + "store-bench-cluster-\(port)"
                clusterDirectory = dir
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                args += ["--cluster-enabled", "yes", "--dir", dir]
            }
            if let dir = tlsDirectory, let tlsPort {
                args += [
                    "--tls-port", String(tlsPort), "--tls-cert-file", dir + "/server.crt", "--tls-key-file", dir + "/server.key",
                    "--tls-ca-cert-file", dir + "/ca.crt", "--tls-auth-clients", "yes",
                ]
            }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            var cArgs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
            var child: pid_t = 0
            let rc = posix_spawn(&child, path, &actions, nil, &cArgs, environ)
            posix_spawn_file_actions_destroy(&actions)
            for a in cArgs { free(a) }
            guard rc == 0 else { continue }
            // Ready when it accepts a connection (polled: an external process), or gone.
            for _ in 0..<500 {
                var status: Int32 = 0
                if waitpid(child, &status, WNOHANG) == child { break }
                if Self.accepts(port: port) {
                    self.pid = child
                    self.port = port
                    self.tlsPort = tlsPort
                    return
                }
                usleep(10_000)
            }
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        print("redis-server did not start (last port \(lastPort))")
        throw StoreBench.BenchError.serverDidNotStart
    }

    func stop() {
        defer { if let dir = clusterDirectory { try? FileManager.default.removeItem(atPath: dir) } }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<500 {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }

    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
