import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing
import Verifier

@testable import AssertGateCore

/// Keys attested before `fraudMetric` was enabled join the refresh schedule
/// when the refresher starts: every store backend, walked a step at a time.
@Suite(.serialized) struct ReceiptBackfillTests {
    private func refresher(on store: any Store) throws -> (ReceiptRefresher, NIOThreadPool) {
        let token = try DeviceCheckToken(pem: try TestKeys.ecPrivateKeyPEM(), teamId: "T", keyId: "K")
        let tls = try TLSClientContext(caFile: nil, certificatePath: nil, privateKeyPath: nil)
        // Never contacted: backfill only touches the store.
        let apple = try #require(AppleHTTPSClient(baseURL: "https://127.0.0.1:1", tls: tls))
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let refresher = ReceiptRefresher(
            eventLoop: store.eventLoop, store: store, production: apple, development: apple, token: token,
            anchors: .appleRootG3, clockSkew: 60,
            settings: .init(pollEvery: .seconds(3600), refreshEvery: 600), threadPool: pool, metrics: nil,
            logger: Logger(label: "test"), clock: { 1_000_000 })
        return (refresher, pool)
    }

    @Test(arguments: StoreBackend.allCases)
    func keysWithoutAScheduleEntryAreAddedAndScheduledOnesKeepTheirTime(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            var unscheduled: [[UInt8]] = []
            for _ in 0..<5 {
                let key = Fixtures.newKey()
                _ = try await Fixtures.register(key, in: s)
                unscheduled.append(key.keyId)
            }
            var early = Fixtures.newKey()
            early.refreshAt = 5
            _ = try await Fixtures.register(early, in: s)
            let (refresher, pool) = try refresher(on: s)
            // Steps of 2 keys: the walk continues until the store says it is done.
            #expect(try await refresher.backfill(step: 2).get() == 5)
            #expect(try await refresher.backfill(step: 2).get() == 0)
            // The old schedule entry kept its time; the others fall within the spread.
            #expect(try await s.claimDueReceiptRefreshes(now: 5, lease: 10_000_000, limit: 100).get() == [early.keyId])
            #expect(try await s.claimDueReceiptRefreshes(now: 999_999, lease: 10_000_000, limit: 100).get().isEmpty)
            let claimed = try await s.claimDueReceiptRefreshes(now: 1_000_600, lease: 10_000_000, limit: 100).get()
            #expect(Set(claimed) == Set(unscheduled))
            try await pool.shutdownGracefully()
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func aWalkCompletedWithinRefreshEveryIsNotRepeated(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            // Nothing recorded: this gateway walks, and records it (refreshEvery 600 s).
            #expect(try await s.lastBackfillWalk(now: 1_000_000).get() == nil)
            let first = Fixtures.newKey()
            _ = try await Fixtures.register(first, in: s)
            let (refresher, pool) = try refresher(on: s)
            guard case .walked(let added) = try await refresher.backfillIfDue().get() else {
                Issue.record("the first start must walk")
                return
            }
            #expect(added >= 1)
            #expect(try await s.lastBackfillWalk(now: 1_000_000).get() == 1_000_000)
            // The next gateway's start within refreshEvery does not walk: a
            // key attested meanwhile without a schedule entry stays off it.
            let later = Fixtures.newKey()
            _ = try await Fixtures.register(later, in: s)
            #expect(try await refresher.backfillIfDue().get() == .skipped(walkedAt: 1_000_000))
            let due = try await s.claimDueReceiptRefreshes(now: 10_000_000, lease: 1, limit: 1000).get()
            #expect(due.contains(first.keyId))
            #expect(!due.contains(later.keyId))
            // The record lapses after refreshEvery: MemoryStore by the given
            // time, Redis by the key's own expiry (600 s, real time).
            if let redis = s as? RedisStore {
                let ttl = try await redis.redis.send(key: "ag:rr:walked", RESPCommand("PTTL", "ag:rr:walked")).get().int64
                #expect((1...600_000).contains(ttl ?? -1))
            } else {
                #expect(try await s.lastBackfillWalk(now: 1_000_600).get() == nil)
            }
            try await pool.shutdownGracefully()
        }
    }
}
