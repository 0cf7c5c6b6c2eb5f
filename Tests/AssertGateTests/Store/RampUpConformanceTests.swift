import AssertGateRedis
import NIOCore
import Testing

@testable import AssertGateCore

/// risk.md §4: the attestation ramp-up budget, against every store backend.
/// On Redis the bucket runs on the server's clock, so refill is observed by
/// taking until the bucket allows one (bounded by a deadline), never by sleeping.
@Suite("Store conformance: attestation ramp-up", .timeLimit(.minutes(2)))
struct RampUpConformanceTests {
    @Test(arguments: StoreBackend.allCases)
    func theBurstIsSharedByEveryStoreThenRefusedWithRetryAfter(_ backend: StoreBackend) async throws {
        try await withStore(backend, loops: 2) { h in
            // 0.01/s: nothing refills while the test runs.
            let rate = RateConfig(perSecond: 0.01, burst: 3)
            let stores = h.stores
            var allowed = 0
            var retries: [Int] = []
            for i in 0..<6 {
                switch try await stores[i % stores.count].takeAttestChallengeBudget(rate: rate).get() {
                case .allowed: allowed += 1
                case .limited(let seconds): retries.append(seconds)
                }
            }
            #expect(allowed == 3)
            #expect(retries.count == 3)
            // One more needs 1 / 0.01 s = 100 s.
            #expect(retries.allSatisfy { (90...100).contains($0) }, "\(retries)")
            if let redis = h.store as? RedisStore {
                // Full again after ~300 s: the key expires then, not never.
                let ttl = try await redis.redis.send(
                    key: RedisStore.rampUpKey, RESPCommand("PTTL", .string(RedisStore.rampUpKey))
                ).get()
                #expect((1...301_000).contains(ttl.int64 ?? -1), "\(ttl)")
            }
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func theBucketRefillsAtPerSecond(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let rate = RateConfig(perSecond: 4, burst: 1)
            if let clock = h.clock {
                #expect(try await h.store.takeAttestChallengeBudget(rate: rate).get() == .allowed)
                #expect(try await h.store.takeAttestChallengeBudget(rate: rate).get() == .limited(retryAfterSeconds: 1))
                clock.advance(by: .milliseconds(249))
                #expect(try await h.store.takeAttestChallengeBudget(rate: rate).get() == .limited(retryAfterSeconds: 1))
                clock.advance(by: .milliseconds(2))
                #expect(try await h.store.takeAttestChallengeBudget(rate: rate).get() == .allowed)
                #expect(try await h.store.takeAttestChallengeBudget(rate: rate).get() == .limited(retryAfterSeconds: 1))
                return
            }
            // On the server's clock, counted over a measured window (a busy
            // host may pause this task at any await, so no two calls are
            // assumed close together): at most burst + perSecond × window are
            // allowed, and more than the burst once a token's time has passed.
            let start = NIODeadline.now()
            var allowed = 0
            var refusals: [Int] = []
            func take() async throws {
                switch try await h.store.takeAttestChallengeBudget(rate: rate).get() {
                case .allowed: allowed += 1
                case .limited(let seconds): refusals.append(seconds)
                }
            }
            try await take()
            // The last take runs on the server ≥ 1.5 s after the first did.
            let firstAnswered = NIODeadline.now()
            while NIODeadline.now() - firstAnswered < .milliseconds(1500) {
                try await take()
                try await Task.sleep(for: .milliseconds(10))
            }
            try await take()
            let window = Double((NIODeadline.now() - start).nanoseconds) / 1e9
            #expect(Double(allowed) <= 1 + 4 * window, "\(allowed) allowed in \(window) s")
            #expect(allowed >= 2, "\(allowed) allowed in \(window) s")
            #expect(!refusals.isEmpty && refusals.allSatisfy { $0 == 1 }, "\(refusals)")
        }
    }

    @Test(arguments: [StoreBackend.memory, .redis])
    func aChangedRateAppliesFromTheNextTake(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let slow = RateConfig(perSecond: 0.01, burst: 2)
            #expect(try await h.store.takeAttestChallengeBudget(rate: slow).get() == .allowed)
            #expect(try await h.store.takeAttestChallengeBudget(rate: slow).get() == .allowed)
            // 100 s for one more, less what trickled in while the test ran.
            guard case .limited(let before) = try await h.store.takeAttestChallengeBudget(rate: slow).get() else {
                Issue.record("the burst was exceeded")
                return
            }
            #expect((90...100).contains(before), "\(before)")
            // A reload to a faster rate: the empty bucket refills at the new
            // rate (a token in 2 s at most), not after the old rate's 100 s.
            let faster = RateConfig(perSecond: 0.5, burst: 5)
            let next = try await h.store.takeAttestChallengeBudget(rate: faster).get()
            if case .limited(let wait) = next { #expect(wait <= 2, "\(wait)") }
            if h.clock != nil { #expect(next == .limited(retryAfterSeconds: 2)) }
            // And a reload never refills it: what is left is kept, capped at the new burst.
            let fresh = RateConfig(perSecond: 0.01, burst: 1)
            let after = try await h.store.takeAttestChallengeBudget(rate: fresh).get()
            #expect(after != .allowed)
            if h.clock != nil { #expect(after == .limited(retryAfterSeconds: 100)) }
        }
    }

    enum RampTestError: Error { case neverRefilled }
}
