import AssertGateRedis
import NIOCore
import Testing
import Verifier

@testable import AssertGateCore

/// risk.md §3: the device-token first-use record and the bit-update queue,
/// against every store backend. Queue times are passed in (unix ms), so a
/// lease or a backoff passes by naming a later time, not by waiting.
@Suite("Store conformance: DeviceCheck", .timeLimit(.minutes(2)))
struct DeviceCheckStoreConformanceTests {
    static let t0: Int64 = 1_780_000_000_000

    static func update(at: Int64 = t0, bit0: Bool? = true, bit1: Bool? = nil) -> DeviceBitUpdate {
        // The shape of a real token: standard base64 with padding.
        let token = Base64.encode(Fixtures.randomBytes(1500))
        return DeviceBitUpdate(deviceToken: token, environment: .development, bit0: bit0, bit1: bit1, enqueuedAt: at)
    }

    // MARK: device tokens

    @Test(arguments: StoreBackend.allCases)
    func aDeviceTokenIsClaimedOnceUntilItsRecordExpires(_ backend: StoreBackend) async throws {
        try await withStore(backend, loops: 2) { h in
            let hash = Fixtures.randomBytes(32)
            let stores = h.stores
            #expect(try await stores[0].claimDeviceToken(hash: hash, ttl: .seconds(60)).get())
            #expect(try await stores[1].claimDeviceToken(hash: hash, ttl: .seconds(60)).get() == false)
            #expect(try await stores[0].claimDeviceToken(hash: hash, ttl: .seconds(60)).get() == false)
            #expect(try await stores[1].claimDeviceToken(hash: Fixtures.randomBytes(32), ttl: .seconds(60)).get())
            await #expect(throws: StoreError.self) {
                try await h.store.claimDeviceToken(hash: Fixtures.randomBytes(31), ttl: .seconds(1)).get()
            }
            if let redis = h.store as? RedisStore {
                // The hash is the key; nothing of the token is stored.
                let key = "ag:dt:{\(Base64.encodeURL(hash))}"
                #expect(try await redis.redis.send(key: key, RESPCommand("GET", .string(key))).get().string == "1")
            }
            // After the TTL the token counts as new again.
            let brief = Fixtures.randomBytes(32)
            #expect(try await h.store.claimDeviceToken(hash: brief, ttl: .milliseconds(300)).get())
            if let clock = h.clock {
                #expect(try await h.store.claimDeviceToken(hash: brief, ttl: .seconds(60)).get() == false)
                clock.advance(by: .milliseconds(301))
                #expect(try await h.store.claimDeviceToken(hash: brief, ttl: .seconds(60)).get())
            } else {
                let deadline = NIODeadline.now() + .seconds(15)
                while try await h.store.claimDeviceToken(hash: brief, ttl: .seconds(60)).get() == false {
                    guard NIODeadline.now() < deadline else { throw QueueTestError.notExpired }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(try await h.store.claimDeviceToken(hash: brief, ttl: .seconds(60)).get() == false)
        }
    }

    // MARK: bit-update queue

    /// `deviceCheck.maxQueuedUpdates`: a full queue stores nothing more and
    /// says so; an id already queued still answers true; an ack makes room.
    @Test(arguments: StoreBackend.allCases)
    func aFullQueueRefusesNewUpdates(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            let (a, b, c) = (Self.update(), Self.update(), Self.update())
            #expect(try await s.enqueueDeviceBitUpdate(a, maxQueued: 2).get())
            #expect(try await s.enqueueDeviceBitUpdate(b, maxQueued: 2).get())
            #expect(try await s.enqueueDeviceBitUpdate(c, maxQueued: 2).get() == false)
            #expect(try await s.enqueueDeviceBitUpdate(a, maxQueued: 2).get())
            #expect(try await s.deviceBitQueueDepth().get() == 2)
            try await s.ackDeviceBitUpdate(id: a.id).get()
            #expect(try await s.enqueueDeviceBitUpdate(c, maxQueued: 2).get())
            #expect(try await s.deviceBitQueueDepth().get() == 2)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func enqueueClaimAck(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            let first = Self.update(at: Self.t0, bit0: true, bit1: false)
            let second = Self.update(at: Self.t0 + 10, bit0: nil, bit1: true)
            #expect(try await s.enqueueDeviceBitUpdate(first, maxQueued: 1_000_000).get())
            #expect(try await s.enqueueDeviceBitUpdate(second, maxQueued: 1_000_000).get())
            // The same id again (a retried write) is not a second update.
            #expect(try await s.enqueueDeviceBitUpdate(first, maxQueued: 1_000_000).get())
            #expect(try await s.deviceBitQueueDepth().get() == 2)
            // Not due before its enqueue time.
            #expect(try await s.claimDeviceBitUpdates(nowMillis: Self.t0 - 1, leaseMillis: 1000, limit: 10).get().isEmpty)

            let claimed = try await s.claimDeviceBitUpdates(nowMillis: Self.t0 + 5, leaseMillis: 1000, limit: 10).get()
            var expected = first
            expected.attempts = 1
            #expect(claimed == [expected])
            // The first is leased; the second is due now.
            let next = try await s.claimDeviceBitUpdates(nowMillis: Self.t0 + 20, leaseMillis: 1000, limit: 10).get()
            #expect(next.map(\.id) == [second.id])
            #expect(next.first?.bit0 == nil && next.first?.bit1 == true && next.first?.deviceToken == second.deviceToken)

            try await s.ackDeviceBitUpdate(id: first.id).get()
            #expect(try await s.deviceBitQueueDepth().get() == 1)
            try await s.ackDeviceBitUpdate(id: second.id).get()
            try await s.ackDeviceBitUpdate(id: second.id).get()
            #expect(try await s.deviceBitQueueDepth().get() == 0)
            // Acked updates never come back, leases or not.
            #expect(try await s.claimDeviceBitUpdates(nowMillis: Self.t0 + 60_000, leaseMillis: 1000, limit: 10).get().isEmpty)
            if let redis = s as? RedisStore {
                // Nothing of them is left: the token is gone with the update.
                for key in [RedisStore.bitQueueDue, RedisStore.bitQueuePayloads, RedisStore.bitQueueAttempts] {
                    #expect(try await redis.redis.send(key: key, RESPCommand("EXISTS", .string(key))).get() == .integer(0))
                }
            }
        }
    }

    /// `deviceCheck.updateBatch` allows 1000: a claim that large is one reply
    /// of 3,000 elements, which the client's limits must take.
    @Test(arguments: StoreBackend.allCases)
    func aClaimOfTheLargestBatchIsRead(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let updates = (0..<1000).map { _ in Self.update() }
            for u in updates { #expect(try await h.store.enqueueDeviceBitUpdate(u, maxQueued: 1_000_000).get()) }
            let batch = try await h.store.claimDeviceBitUpdates(nowMillis: Self.t0 + 100, leaseMillis: 60_000, limit: 1000).get()
            #expect(batch.count == 1000)
            #expect(Set(batch.map(\.id)) == Set(updates.map(\.id)))
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func twoConsumersNeverClaimTheSameUpdateWithinALease(_ backend: StoreBackend) async throws {
        try await withStore(backend, loops: 2) { h in
            let updates = (0..<60).map { i in Self.update(at: Self.t0 + Int64(i % 7)) }
            for u in updates { #expect(try await h.store.enqueueDeviceBitUpdate(u, maxQueued: 1_000_000).get()) }
            let stores = h.stores
            // Both claim at once, in small batches, until the queue has nothing due.
            let batches = try await withThrowingTaskGroup(of: [String].self) { group in
                for store in stores {
                    group.addTask {
                        var mine: [String] = []
                        while true {
                            let batch = try await store.claimDeviceBitUpdates(
                                nowMillis: Self.t0 + 100, leaseMillis: 60_000, limit: 4
                            ).get()
                            if batch.isEmpty { return mine }
                            mine += batch.map(\.id)
                        }
                    }
                }
                var all: [[String]] = []
                for try await ids in group { all.append(ids) }
                return all
            }
            let claimed = batches.flatMap { $0 }
            #expect(claimed.count == updates.count)
            #expect(Set(claimed) == Set(updates.map(\.id)))
            #expect(try await h.store.deviceBitQueueDepth().get() == updates.count)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func anUnackedUpdateIsDueAgainAfterItsLeaseAndRetryFencesOldClaims(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            let u = Self.update()
            #expect(try await s.enqueueDeviceBitUpdate(u, maxQueued: 1_000_000).get())
            let lease: Int64 = 30_000
            let a = try #require(try await s.claimDeviceBitUpdates(nowMillis: Self.t0, leaseMillis: lease, limit: 1).get().first)
            #expect(a.attempts == 1)
            #expect(try await s.claimDeviceBitUpdates(nowMillis: Self.t0 + lease - 1, leaseMillis: lease, limit: 1).get().isEmpty)
            // Its claimer died: due again when the lease ends, one more attempt.
            let b = try #require(
                try await s.claimDeviceBitUpdates(nowMillis: Self.t0 + lease, leaseMillis: lease, limit: 1).get().first)
            #expect(b.id == u.id)
            #expect(b.attempts == 2)
            // The first claim no longer holds it: its retry changes nothing.
            #expect(try await s.retryDeviceBitUpdate(a, atMillis: Self.t0 + lease + 1).get() == false)
            #expect(try await s.claimDeviceBitUpdates(nowMillis: Self.t0 + lease + 1, leaseMillis: lease, limit: 1).get().isEmpty)
            // The latest claim backs off: not due before the time it named, due at it.
            let backoff = Self.t0 + lease + 5_000
            #expect(try await s.retryDeviceBitUpdate(b, atMillis: backoff).get())
            #expect(try await s.claimDeviceBitUpdates(nowMillis: backoff - 1, leaseMillis: lease, limit: 1).get().isEmpty)
            let c = try #require(try await s.claimDeviceBitUpdates(nowMillis: backoff, leaseMillis: lease, limit: 1).get().first)
            #expect(c.attempts == 3)
            #expect(c.enqueuedAt == u.enqueuedAt)
            #expect(try await s.deviceBitQueueDepth().get() == 1)
            try await s.ackDeviceBitUpdate(id: c.id).get()
            // Gone: a retry of an acked update is refused too.
            #expect(try await s.retryDeviceBitUpdate(c, atMillis: backoff).get() == false)
            #expect(try await s.deviceBitQueueDepth().get() == 0)
        }
    }

    @Test(arguments: [StoreBackend.memory, .redis])
    func updatesThatCouldNotBeDeliveredAreRefused(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            var spaced = Self.update()
            spaced.deviceToken = "abc def"
            var noBits = Self.update()
            noBits.bit0 = nil
            var empty = Self.update()
            empty.deviceToken = ""
            var badId = Self.update()
            badId.id = "a b"
            for bad in [spaced, noBits, empty, badId] {
                await #expect(throws: StoreError.self) { try await h.store.enqueueDeviceBitUpdate(bad, maxQueued: 1_000_000).get() }
            }
            let depth = try await h.store.deviceBitQueueDepth().get()
            #expect(depth == 0)
        }
    }

    /// The queue is in Redis: a gateway that starts (a new client, new
    /// connections) finds what another one queued, claimed and did not ack.
    @Test func queuedUpdatesOutliveTheStoreThatQueuedThem() async throws {
        try await withStore(.redis) { h in
            let server = try #require(h.server)
            let u = Self.update()
            #expect(try await h.store.enqueueDeviceBitUpdate(u, maxQueued: 1_000_000).get())
            _ = try await h.store.claimDeviceBitUpdates(nowMillis: Self.t0, leaseMillis: 1000, limit: 1).get()

            let config = RedisClientConfiguration(
                url: try RedisURL(parsing: server.url), connectTimeout: .seconds(2), commandTimeout: .seconds(2))
            let restarted = RedisStoreGroup(configuration: config, group: h.group)
            do {
                let store = restarted.store(for: h.group.next())
                #expect(try await store.deviceBitQueueDepth().get() == 1)
                let again = try await store.claimDeviceBitUpdates(nowMillis: Self.t0 + 1000, leaseMillis: 1000, limit: 5).get()
                #expect(again.map(\.id) == [u.id])
                #expect(again.first?.deviceToken == u.deviceToken)
                #expect(again.first?.attempts == 2)
            } catch {
                try? await restarted.shutdown().get()
                throw error
            }
            try await restarted.shutdown().get()
        }
    }

    @Test func anUpdateDescribesItselfWithoutItsToken() {
        let u = Self.update(bit0: false, bit1: true)
        #expect(!u.description.contains(u.deviceToken))
        #expect(!u.description.contains(String(u.deviceToken.prefix(16))))
        #expect(u.description.contains("bit0=0 bit1=1"))
        #expect(u.description.contains(u.id))
    }

    enum QueueTestError: Error { case notExpired }
}
