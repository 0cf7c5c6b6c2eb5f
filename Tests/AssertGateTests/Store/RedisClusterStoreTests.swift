import AssertGateRedis
import AssertGateTestSupport
import NIOCore
import NIOPosix
import Testing
import Verifier

@testable import AssertGateCore

/// The cluster client against real `redis-server --cluster-enabled` nodes:
/// slots computed like Redis, redirects followed while a slot migrates, a
/// master down failing only its own keys, seeds that are down or are not a
/// cluster. (The whole store contract over a cluster is the conformance
/// suite's `redisCluster` backend.)
@Suite("Redis Cluster under the store", .timeLimit(.minutes(2)))
struct RedisClusterTests {
    @Test func aSlotThatMovesIsFollowed() async throws {
        let metrics = GatewayMetrics()
        try await withClusterStore(metrics: metrics) { cluster, store, client in
            let key = Fixtures.newKey(userId: "mover")
            #expect(try await Fixtures.register(key, in: store) == .registered(userKeyCount: 1))
            let slot = Int(RedisHashSlot.slot(ofTag: Base64.encodeURL(key.keyId)))
            let from = try cluster.owner(ofSlot: slot)
            let to = (from + 1) % cluster.nodes.count
            try cluster.migrate(slot: slot, from: from, to: to)
            // The client still maps the slot to `from`: MOVED, then the commit lands on `to`.
            let commit = try await store.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get()
            #expect(commit.rejection == nil)
            #expect(try await client.master(forSlot: UInt16(slot)).get()?.port == cluster.nodes[to].port)
            #expect(try cluster.nodes[to].run(["HGET", "ag:{\(Base64.encodeURL(key.keyId))}:key", "cnt"]).string == "1")
            #expect(try cluster.nodes[from].run(["CLUSTER", "COUNTKEYSINSLOT", String(slot)]).int64 == 0)
            #expect(metrics.redisCluster.moved.value == 1)
            #expect(metrics.redisCluster.ask.value == 0)
            #expect(metrics.redisCluster.mapRefreshed.value >= 1)
        }
    }

    @Test func aSlotInMigrationIsAskedAtItsNewNode() async throws {
        let metrics = GatewayMetrics()
        try await withClusterStore(metrics: metrics) { cluster, store, _ in
            let key = Fixtures.newKey(userId: nil)
            #expect(try await Fixtures.register(key, in: store) == .registered(userKeyCount: 0))
            let tag = Base64.encodeURL(key.keyId)
            let slot = Int(RedisHashSlot.slot(ofTag: tag))
            let from = try cluster.owner(ofSlot: slot)
            let to = (from + 1) % cluster.nodes.count
            // Half-way: the record has moved, the old node answers ASK for it.
            try cluster.beginMigration(slot: slot, from: from, to: to)
            let moved = try cluster.nodes[from].run([
                "MIGRATE", "127.0.0.1", String(cluster.nodes[to].port), "ag:{\(tag)}:key", "0", "5000",
            ])
            #expect(moved == .status("OK"))
            #expect(try await store.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get().rejection == nil)
            // A new challenge is created where the slot is going, and spent there.
            let challenge = try await Fixtures.assertChallenge(key.keyId, in: store)
            #expect(try cluster.nodes[to].run(["CLUSTER", "COUNTKEYSINSLOT", String(slot)]).int64 == 2)
            let spent = try await store.commitAssertion(keyId: key.keyId, counter: 2, challenge: challenge).get()
            #expect(spent.rejection == nil)
            #expect(try await store.commitAssertion(keyId: key.keyId, counter: 2, challenge: nil).get().rejection == .counterReplay)
            #expect(try cluster.nodes[from].run(["CLUSTER", "COUNTKEYSINSLOT", String(slot)]).int64 == 0)

            // Registering another key of that slot needs its challenge (on the
            // new node) and its record (nowhere yet) together: Redis answers
            // TRYAGAIN until the migration ends; the client retries, then reports it.
            var other = Fixtures.newKey(userId: nil)
            while RedisHashSlot.slot(ofTag: Base64.encodeURL(other.keyId)) != UInt16(slot) {
                other.keyId = Fixtures.randomBytes(32)
            }
            let attest = StoreChallenge.generate()
            try await store.issueChallenge(keyId: other.keyId, purpose: .attest, challenge: attest, ttl: .seconds(60)).get()
            let error = await #expect(throws: StoreError.self) {
                _ = try await store.registerKey(other, attestChallenge: attest).get()
            }
            #expect("\(error.map { "\($0)" } ?? "")".contains("TRYAGAIN"))
            #expect(metrics.redisCluster.tryAgain.value == 5)
            #expect(metrics.redisCluster.ask.value >= 4)
            try cluster.finishMigration(slot: slot, from: from, to: to)
            #expect(try await store.registerKey(other, attestChallenge: attest).get() == .registered(userKeyCount: 0))
            #expect(try await store.commitAssertion(keyId: key.keyId, counter: 3, challenge: nil).get().rejection == nil)
            #expect(try cluster.nodes[to].run(["HGET", "ag:{\(tag)}:key", "cnt"]).string == "3")
        }
    }

    @Test func recordsWithoutAKeyCountAreRepairedByTheirFirstCommit() async throws {
        try await withClusterStore { cluster, store, _ in
            // Two keys of one user, as a single server wrote them (no `ukc`),
            // e.g. after moving the data into a cluster.
            let user = "legacy-\(UInt32.random(in: 0...UInt32.max))"
            let keys = [Fixtures.newKey(userId: user), Fixtures.newKey(userId: user)]
            #expect(try await Fixtures.register(keys[0], in: store) == .registered(userKeyCount: 1))
            #expect(try await Fixtures.register(keys[1], in: store) == .registered(userKeyCount: 2))
            for key in keys {
                let name = "ag:{\(Base64.encodeURL(key.keyId))}:key"
                let owner = try cluster.owner(ofSlot: Int(RedisHashSlot.slot(forKey: name)))
                #expect(try cluster.nodes[owner].run(["HDEL", name, "ukc"]).int64 == 1)
            }
            // The first commit answers 1 and starts the repair; the next ones see 2.
            let first = try await store.commitAssertion(keyId: keys[0].keyId, counter: 1, challenge: nil).get()
            #expect(first.rejection == nil && first.state?.userKeyCount == 1)
            var counter: UInt32 = 1
            var seen = 1
            let deadline = NIODeadline.now() + .seconds(10)
            while seen != 2, NIODeadline.now() < deadline {
                counter += 1
                seen = try await store.commitAssertion(keyId: keys[0].keyId, counter: counter, challenge: nil).get()
                    .state?.userKeyCount ?? -1
            }
            #expect(seen == 2)
            let other = try await store.commitAssertion(keyId: keys[1].keyId, counter: 1, challenge: nil).get()
            #expect(other.state?.userKeyCount == 2)
        }
    }

    @Test func aMasterDownFailsOnlyItsOwnKeys() async throws {
        try await withClusterStore { cluster, store, _ in
            var keys: [Int: NewKeyRecord] = [:]
            while keys.count < 2 {
                let key = Fixtures.newKey(userId: nil)
                let owner = try cluster.owner(ofSlot: Int(RedisHashSlot.slot(ofTag: Base64.encodeURL(key.keyId))))
                guard owner < 2, keys[owner] == nil else { continue }
                #expect(try await Fixtures.register(key, in: store) == .registered(userKeyCount: 0))
                keys[owner] = key
            }
            let down = try #require(keys[0]), up = try #require(keys[1])
            cluster.nodes[0].stop()
            await #expect(throws: RedisError.self) {
                _ = try await store.commitAssertion(keyId: down.keyId, counter: 1, challenge: nil).get()
            }
            #expect(try await store.commitAssertion(keyId: up.keyId, counter: 1, challenge: nil).get().rejection == nil)
            // Two of three masters answer: still ready (one shard's keys fail
            // on their own); with two down this gateway is not.
            try await store.ping().get()
            cluster.nodes[1].stop()
            await #expect(throws: RedisError.self) { try await store.ping().get() }
        }
    }

    @Test func aFailoverIsFollowed() async throws {
        try await withClusterStore { cluster, store, client in
            // A key on master 0, replicated; master 0 dies, its replica takes
            // over: the first commit fails (connection refused) and makes the
            // client read the map again; the next ones reach the new master.
            var key = Fixtures.newKey(userId: nil)
            while try cluster.owner(ofSlot: Int(RedisHashSlot.slot(ofBase64URLOf: key.keyId))) != 0 {
                key.keyId = Fixtures.randomBytes(32)
            }
            let replica = try cluster.addReplica(of: 0)
            #expect(try await Fixtures.register(key, in: store) == .registered(userKeyCount: 0))
            #expect(try cluster.nodes[0].run(["WAIT", "1", "5000"]).int64 == 1)
            cluster.nodes[0].stop()
            try cluster.takeOver(replica: replica, from: 0)
            let slot = RedisHashSlot.slot(ofBase64URLOf: key.keyId)
            var outcome: Result<CommitResult, any Error> = .failure(RedisError.unavailable(.notConnected))
            let deadline = NIODeadline.now() + .seconds(10)
            while case .failure = outcome, NIODeadline.now() < deadline {
                do {
                    outcome = .success(try await store.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get())
                } catch {
                    outcome = .failure(error)
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            #expect(try outcome.get().rejection == nil)
            #expect(try await client.master(forSlot: slot).get()?.port == cluster.nodes[replica].port)
            try await store.ping().get()
        }
    }

    @Test func seedsThatAreDownOrNotAClusterAreReported() async throws {
        let plain = try RedisServerFixture()
        defer { plain.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // A standalone server as the only seed: its own refusal is the error.
        let lonely = makeStore(seeds: [plain.port], group: group)
        let error = await #expect(throws: RedisError.self) { try await lonely.ping().get() }
        #expect("\(error.map { "\($0)" } ?? "")".contains("cluster support disabled"))
        try await lonely.shutdown().get()
        // A dead seed before a live one is skipped.
        let cluster = try RedisClusterFixture(masters: 1)
        defer { cluster.stop() }
        let dead = try ReservedPort()
        defer { withExtendedLifetime(dead) {} }
        let store = makeStore(seeds: [dead.port, cluster.nodes[0].port], group: group)
        try await store.ping().get()
        let key = Fixtures.newKey(userId: "seeded")
        #expect(try await Fixtures.register(key, in: store) == .registered(userKeyCount: 1))
        try await store.shutdown().get()
        try await group.shutdownGracefully()
    }

    // MARK: helpers

    private func makeStore(
        seeds: [Int], group: EventLoopGroup, metrics: GatewayMetrics? = nil, commandTimeout: TimeAmount = .seconds(2)
    ) -> RedisStore {
        var config = RedisClientConfiguration(
            url: RedisURL(host: "127.0.0.1", port: seeds[0]), connectTimeout: .seconds(2), commandTimeout: commandTimeout)
        config.clusterSeeds = seeds.map { RedisNodeAddress(host: "127.0.0.1", port: $0) }
        config.clusterObserver = metrics?.redisCluster
        return RedisStore(configuration: config, eventLoop: group.next())
    }

    private func withClusterStore(
        metrics: GatewayMetrics? = nil,
        _ body: (RedisClusterFixture, RedisStore, RedisClusterClient) async throws -> Void
    ) async throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let store = makeStore(seeds: cluster.nodes.map(\.port), group: group, metrics: metrics)
        var failure: (any Error)?
        do {
            let client = try #require(store.redis as? RedisClusterClient)
            try await body(cluster, store, client)
        } catch {
            failure = error
        }
        try? await store.shutdown().get()
        try? await group.shutdownGracefully()
        if let failure { throw failure }
    }
}
