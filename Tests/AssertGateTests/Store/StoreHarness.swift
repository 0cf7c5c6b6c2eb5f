import AssertGateRedis
import AssertGateTestSupport
import Verifier
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateCore

/// The implementations the conformance suite runs against.
enum StoreBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory
    case redis
    /// `rediss://`: the same Redis behind TLS, client certificate required.
    case redisTLS
    /// A Redis Cluster of three masters (`store.redis.cluster`).
    case redisCluster
    var description: String { rawValue }
}

/// A monotonic clock the test moves by hand.
final class ManualClock: Sendable {
    private let now = NIOLockedValueBox(NIODeadline.uptimeNanoseconds(1_000_000_000))
    func read() -> NIODeadline { now.withLockedValue { $0 } }
    func advance(by amount: TimeAmount) { now.withLockedValue { $0 = $0 + amount } }
}

/// One store backend on `loops` event loops, with what the tests need to
/// look behind the API (challenge presence, letting TTLs pass).
struct StoreHarness {
    let backend: StoreBackend
    let group: MultiThreadedEventLoopGroup
    let provider: any StoreProvider
    let clock: ManualClock?
    let server: RedisServerFixture?
    var cluster: RedisClusterFixture? = nil

    /// The store of the first loop.
    var store: any Store { provider.store(for: group.next()) }

    /// One store per loop.
    var stores: [any Store] { group.makeIterator().map { provider.store(for: $0) } }

    func challengeExists(keyId: [UInt8], challenge: String) async throws -> Bool {
        switch backend {
        case .memory:
            guard let m = provider as? MemoryStore else { throw HarnessError.wrongProvider }
            return m.hasChallenge(keyId: keyId, challenge: challenge)
        case .redis, .redisTLS, .redisCluster:
            guard let s = store as? RedisStore else { throw HarnessError.wrongProvider }
            let name = "ag:{\(Base64.encodeURL(keyId))}:ch:\(challenge)"
            let reply = try await s.redis.send(key: name, RESPCommand("EXISTS", .string(name))).get()
            return reply == .integer(1)
        }
    }

    /// Makes `ttl` pass for a challenge issued with it: the manual clock
    /// moves, or Redis is polled (deadline ttl + 15 s) until it expired the key.
    func letExpire(keyId: [UInt8], challenge: String, ttl: TimeAmount) async throws {
        switch backend {
        case .memory:
            clock?.advance(by: ttl + .milliseconds(1))
        case .redis, .redisTLS, .redisCluster:
            // Generous: the host is shared and slow at times.
            let deadline = NIODeadline.now() + ttl + .seconds(15)
            while try await challengeExists(keyId: keyId, challenge: challenge) {
                guard NIODeadline.now() < deadline else { throw HarnessError.ttlNotHonoured }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    enum HarnessError: Error {
        case wrongProvider
        case ttlNotHonoured
    }
}

/// Builds the backend, runs `body`, and tears everything down (server included) even on failure.
func withStore(
    _ backend: StoreBackend, loops: Int = 1, connections: Int = 1,
    commandTimeout: TimeAmount = .seconds(2),
    _ body: (StoreHarness) async throws -> Void
) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
    var server: RedisServerFixture?
    var cluster: RedisClusterFixture?
    let harness: StoreHarness
    do {
        switch backend {
        case .memory:
            let clock = ManualClock()
            let store = MemoryStore(eventLoop: group.next(), clock: { clock.read() })
            harness = StoreHarness(backend: backend, group: group, provider: store, clock: clock, server: nil)
        case .redis:
            let s = try RedisServerFixture()
            server = s
            let config = RedisClientConfiguration(
                url: try RedisURL(parsing: s.url), connectTimeout: .seconds(2), commandTimeout: commandTimeout,
                connections: connections)
            let provider = RedisStoreGroup(configuration: config, group: group)
            harness = StoreHarness(backend: backend, group: group, provider: provider, clock: nil, server: s)
        case .redisTLS:
            let pki = try await TestPKI.shared.value
            let s = try RedisServerFixture(tls: pki.redisServer(requireClientCertificate: true))
            server = s
            var redis = RedisConfig()
            redis.url = s.tlsURL ?? ""
            redis.connectTimeout = .seconds(2)
            redis.commandTimeout = commandTimeout
            redis.connectionsPerWorker = connections
            var tls = ClientTLSConfig()
            tls.caFile = pki.caCertificate
            tls.certificate = pki.clientCertificate
            tls.privateKey = pki.clientKey
            redis.tls = tls
            let provider = RedisStoreGroup(configuration: try RedisClientConfiguration(redis), group: group)
            harness = StoreHarness(backend: backend, group: group, provider: provider, clock: nil, server: s)
        case .redisCluster:
            let c = try RedisClusterFixture()
            cluster = c
            var redis = RedisConfig()
            redis.cluster = c.seedURLs
            redis.connectTimeout = .seconds(2)
            redis.commandTimeout = commandTimeout
            redis.connectionsPerWorker = connections
            let provider = RedisStoreGroup(configuration: try RedisClientConfiguration(redis), group: group)
            harness = StoreHarness(
                backend: backend, group: group, provider: provider, clock: nil, server: nil, cluster: c)
        }
    } catch {
        cluster?.stop()
        server?.stop()
        try? await group.shutdownGracefully()
        throw error
    }
    var failure: Error?
    do {
        try await body(harness)
    } catch {
        failure = error
    }
    try? await harness.provider.shutdown().get()
    try? await group.shutdownGracefully()
    server?.stop()
    cluster?.stop()
    if let failure { throw failure }
}

enum Fixtures {
    static func randomBytes(_ n: Int) -> [UInt8] {
        (0..<n).map { _ in UInt8.random(in: 0...255) }
    }

    static func newKey(userId: String? = nil, createdAt: Int64 = 1_763_700_000) -> NewKeyRecord {
        NewKeyRecord(
            keyId: randomBytes(32), publicKey: [0x04] + randomBytes(64), appId: "TEAMID1234.com.example.app",
            environment: .production, userId: userId, createdAt: createdAt, receipt: randomBytes(100),
            bundleVersion: "1.2.3", launchCategory: 4, keyPolicy: .macosFullSecurity)
    }

    /// Issues an attest challenge and registers `key` with it.
    static func register(_ key: NewKeyRecord, in store: any Store) async throws -> RegisterResult {
        let c = StoreChallenge.generate()
        try await store.issueChallenge(keyId: key.keyId, purpose: .attest, challenge: c, ttl: .seconds(60)).get()
        return try await store.registerKey(key, attestChallenge: c).get()
    }

    static func assertChallenge(_ keyId: [UInt8], in store: any Store, purpose: ChallengePurpose = .assert) async throws
        -> String
    {
        let c = StoreChallenge.generate()
        try await store.issueChallenge(keyId: keyId, purpose: purpose, challenge: c, ttl: .seconds(60)).get()
        return c
    }
}
