import NIOCore
import NIOPosix
import Testing
import Verifier

@testable import AssertGateCore

/// One suite, run against `MemoryStore` and `RedisStore` (a real redis-server).
@Suite("Store conformance", .timeLimit(.minutes(2)))
struct StoreConformanceTests {
    @Test(arguments: StoreBackend.allCases)
    func registerStoresTheRecordWithCounterZero(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let key = Fixtures.newKey(userId: "user-\(UInt32.random(in: 0...UInt32.max))")
            #expect(try await Fixtures.register(key, in: h.store) == .registered(userKeyCount: 1))
            let loaded = try await h.store.loadKey(keyId: key.keyId).get()
            #expect(
                loaded
                    == StoredKey(
                        publicKey: key.publicKey, appId: key.appId, environment: .production, bundleVersion: "1.2.3",
                        launchCategory: 4, keyPolicy: .macosFullSecurity))
            let record = try #require(try await h.store.keyRecord(keyId: key.keyId).get())
            #expect(record.counter == 0)
            #expect(record.revoked == false)
            #expect(record.userId == key.userId)
            #expect(record.createdAt == key.createdAt)
            #expect(record.publicKey == key.publicKey)
            #expect(record.appId == key.appId)
            #expect(record.environment == .production)
            #expect(record.riskMetric == nil)
            // risk.md §2: the attestation's signals are in the admin record.
            #expect(record.appVersion == "1.2.3")
            #expect(record.launchCategory == 4)
            #expect(record.keyPolicy == .macosFullSecurity)
            #expect(record.adminJSON.contains(#""appVersion":"1.2.3","launchCategory":4,"keyPolicy":"macos-full-security""#))
        }
    }

    /// risk.md §2 admin: a user's keys listed and revoked together (on a
    /// cluster the user's set and each record live on different slots).
    @Test(arguments: StoreBackend.allCases)
    func userKeysAreListedAndRevokedTogether(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let user = "u-\(UInt32.random(in: 0...UInt32.max)) {tag}/é"
            let keys = [Fixtures.newKey(userId: user), Fixtures.newKey(userId: user), Fixtures.newKey(userId: user)]
            let other = Fixtures.newKey(userId: user + "-other")
            for key in keys + [other] { _ = try await Fixtures.register(key, in: h.store) }
            #expect(try await h.store.userKeys(userId: "nobody-\(UInt32.random(in: 0...UInt32.max))").get() == nil)
            let listed = try #require(try await h.store.userKeys(userId: user).get())
            #expect(Set(listed.map(\.keyId)) == Set(keys.map(\.keyId)))
            let order = listed.map { Verifier.Base64.encodeURL($0.keyId) }
            #expect(order == order.sorted())
            #expect(listed.allSatisfy { !$0.revoked && $0.userId == user && $0.launchCategory == 4 })

            let revoked = try #require(try await h.store.revokeUser(userId: user).get())
            #expect(Set(revoked.map(\.keyId)) == Set(keys.map(\.keyId)))
            #expect(revoked.allSatisfy { $0.revoked })
            for key in keys {
                let commit = try await h.store.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get()
                #expect(commit.rejection == .revokedKey)
            }
            // Another user's key is untouched.
            #expect(try await h.store.commitAssertion(keyId: other.keyId, counter: 1, challenge: nil).get().isAccepted)
            #expect(try await h.store.revokeUser(userId: "nobody-\(UInt32.random(in: 0...UInt32.max))").get() == nil)
        }
    }

    /// A user with more keys than one reply may carry (the set is read with
    /// SSCAN): listed (at most 1000) and every key revoked, and registering
    /// another key still works (on a cluster that reads the set too).
    @Test(arguments: StoreBackend.allCases)
    func aUserWithThousandsOfKeysIsListedAndRevoked(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let user = "many-\(UInt32.random(in: 0...UInt32.max))"
            let keys = (0..<1500).map { _ in Fixtures.newKey(userId: user) }
            for key in keys { _ = try await Fixtures.register(key, in: h.store) }
            let listed = try #require(try await h.store.userKeys(userId: user).get())
            #expect(listed.count == 1000)
            let order = listed.map { Verifier.Base64.encodeURL($0.keyId) }
            #expect(order == order.sorted())
            let revoked = try #require(try await h.store.revokeUser(userId: user).get())
            #expect(revoked.count == 1000)
            for key in [keys[0], keys[777], keys[1499]] {
                #expect(try await h.store.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get().rejection == .revokedKey)
            }
            let late = Fixtures.newKey(userId: user)
            _ = try await Fixtures.register(late, in: h.store)
            #expect(try await h.store.commitAssertion(keyId: late.keyId, counter: 1, challenge: nil).get().isAccepted)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func userKeyCountCountsEveryKeyOfTheUser(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let user = "u-\(UInt32.random(in: 0...UInt32.max)) with spaces/é"
            let first = Fixtures.newKey(userId: user)
            let second = Fixtures.newKey(userId: user)
            let anonymous = Fixtures.newKey(userId: nil)
            let emptyUser = Fixtures.newKey(userId: "")
            #expect(try await Fixtures.register(first, in: h.store) == .registered(userKeyCount: 1))
            #expect(try await Fixtures.register(second, in: h.store) == .registered(userKeyCount: 2))
            #expect(try await Fixtures.register(anonymous, in: h.store) == .registered(userKeyCount: 0))
            #expect(try await Fixtures.register(emptyUser, in: h.store) == .registered(userKeyCount: 0))
            #expect(try await h.store.keyRecord(keyId: emptyUser.keyId).get()?.userId == nil)
            // Revoked keys still count.
            _ = try await h.store.revokeKey(keyId: second.keyId).get()
            let result = try await h.store.commitAssertion(keyId: first.keyId, counter: 1, challenge: nil).get()
            #expect(result == CommitResult(
                rejection: nil,
                state: KeyState(revoked: false, userId: user, userKeyCount: 2, riskMetric: nil, riskMetricAt: nil)))
            let anon = try await h.store.commitAssertion(keyId: anonymous.keyId, counter: 1, challenge: nil).get()
            #expect(anon.state == KeyState(revoked: false, userId: nil, userKeyCount: 0, riskMetric: nil, riskMetricAt: nil))
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func concurrentRegistrationsOfOneUserAllSeeEveryKey(_ backend: StoreBackend) async throws {
        try await withStore(backend, loops: 2) { h in
            // Eight keys of one user registered at once (on a cluster: on
            // several masters, each registration in steps); a refused one
            // does not count. Every key then reports the final count.
            let user = "together-\(UInt32.random(in: 0...UInt32.max))"
            let keys = (0..<8).map { _ in Fixtures.newKey(userId: user) }
            let stores = h.stores
            try await withThrowingTaskGroup(of: RegisterResult.self) { group in
                for (i, key) in keys.enumerated() {
                    group.addTask { try await Fixtures.register(key, in: stores[i % stores.count]) }
                }
                for try await r in group {
                    guard case .registered = r else { throw StoreError.unexpectedReply("\(r)") }
                }
            }
            let refused = Fixtures.newKey(userId: user)
            #expect(try await h.store.registerKey(refused, attestChallenge: StoreChallenge.generate()).get()
                == .rejected(.unknownChallenge))
            for key in keys {
                let r = try await h.store.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get()
                #expect(r.state?.userKeyCount == 8)
            }
            let ninth = Fixtures.newKey(userId: user)
            #expect(try await Fixtures.register(ninth, in: h.store) == .registered(userKeyCount: 9))
            let r = try await h.store.commitAssertion(keyId: keys[0].keyId, counter: 2, challenge: nil).get()
            #expect(r.state?.userKeyCount == 9)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func keyExistsKeepsTheChallenge(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let key = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: h.store)
            let c = try await Fixtures.assertChallenge(key.keyId, in: h.store, purpose: .attest)
            var again = Fixtures.newKey()
            again.keyId = key.keyId
            #expect(try await h.store.registerKey(again, attestChallenge: c).get() == .rejected(.keyExists))
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: c))
            // The original record is untouched.
            #expect(try await h.store.loadKey(keyId: key.keyId).get()?.publicKey == key.publicKey)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func registerRefusesUnknownWrongPurposeAndCrossKeyChallenges(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let key = Fixtures.newKey()
            // Never issued.
            #expect(
                try await h.store.registerKey(key, attestChallenge: StoreChallenge.generate()).get()
                    == .rejected(.unknownChallenge))
            // Not even the challenge form.
            #expect(try await h.store.registerKey(key, attestChallenge: "x").get() == .rejected(.unknownChallenge))
            // Purpose assert: refused and not consumed.
            let assertC = try await Fixtures.assertChallenge(key.keyId, in: h.store, purpose: .assert)
            #expect(try await h.store.registerKey(key, attestChallenge: assertC).get() == .rejected(.unknownChallenge))
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: assertC))
            // Issued for another key: refused and not consumed.
            let other = Fixtures.newKey()
            let otherC = try await Fixtures.assertChallenge(other.keyId, in: h.store, purpose: .attest)
            #expect(try await h.store.registerKey(key, attestChallenge: otherC).get() == .rejected(.unknownChallenge))
            #expect(try await h.challengeExists(keyId: other.keyId, challenge: otherC))
            #expect(try await h.store.loadKey(keyId: key.keyId).get() == nil)
            // The right one works once and is consumed.
            let c = try await Fixtures.assertChallenge(key.keyId, in: h.store, purpose: .attest)
            #expect(try await h.store.registerKey(key, attestChallenge: c).get() == .registered(userKeyCount: 0))
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: c) == false)
        }
    }

    /// The attest route's pre-check: live only for an unexpired `attest`
    /// challenge of this key, and asking consumes nothing.
    @Test(arguments: StoreBackend.allCases)
    func anAttestChallengeIsLiveOnlyForItsKeyAndPurpose(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            let key = Fixtures.newKey()
            #expect(try await s.attestChallengeIsLive(keyId: key.keyId, challenge: StoreChallenge.generate()).get() == false)
            #expect(try await s.attestChallengeIsLive(keyId: key.keyId, challenge: "x").get() == false)
            let assertC = try await Fixtures.assertChallenge(key.keyId, in: s, purpose: .assert)
            #expect(try await s.attestChallengeIsLive(keyId: key.keyId, challenge: assertC).get() == false)
            let c = try await Fixtures.assertChallenge(key.keyId, in: s, purpose: .attest)
            #expect(try await s.attestChallengeIsLive(keyId: Fixtures.newKey().keyId, challenge: c).get() == false)
            #expect(try await s.attestChallengeIsLive(keyId: key.keyId, challenge: c).get())
            #expect(try await s.attestChallengeIsLive(keyId: key.keyId, challenge: c).get())
            #expect(try await s.registerKey(key, attestChallenge: c).get() == .registered(userKeyCount: 0))
            #expect(try await s.attestChallengeIsLive(keyId: key.keyId, challenge: c).get() == false)
            let short = StoreChallenge.generate()
            try await s.issueChallenge(keyId: key.keyId, purpose: .attest, challenge: short, ttl: .seconds(1)).get()
            try await h.letExpire(keyId: key.keyId, challenge: short, ttl: .seconds(1))
            #expect(try await s.attestChallengeIsLive(keyId: key.keyId, challenge: short).get() == false)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func counterMustStrictlyIncrease(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            #expect(try await s.commitAssertion(keyId: Fixtures.randomBytes(32), counter: 1, challenge: nil).get()
                == CommitResult(rejection: .unknownKey, state: nil))
            let key = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: s)
            let steps: [(UInt32, ReasonToken?)] = [
                (0, .counterReplay), (1, nil), (1, .counterReplay), (5, nil), (3, .counterReplay), (5, .counterReplay),
                (UInt32.max, nil), (UInt32.max, .counterReplay),
            ]
            for (counter, expected) in steps {
                let r = try await s.commitAssertion(keyId: key.keyId, counter: counter, challenge: nil).get()
                #expect(r.rejection == expected, "counter \(counter)")
                #expect(r.state?.revoked == false)
            }
            #expect(try await s.keyRecord(keyId: key.keyId).get()?.counter == UInt32.max)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func assertionChallengeRules(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            let key = Fixtures.newKey()
            let other = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: s)
            _ = try await Fixtures.register(other, in: s)

            // Accepted and consumed.
            let c1 = try await Fixtures.assertChallenge(key.keyId, in: s)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 1, challenge: c1).get().isAccepted)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 2, challenge: c1).get().rejection
                == .unknownChallenge)

            // Wrong purpose: refused, kept, counter untouched.
            let attestC = try await Fixtures.assertChallenge(key.keyId, in: s, purpose: .attest)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 10, challenge: attestC).get().rejection
                == .unknownChallenge)
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: attestC))

            // Another key's challenge: refused, kept.
            let otherC = try await Fixtures.assertChallenge(other.keyId, in: s)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 10, challenge: otherC).get().rejection
                == .unknownChallenge)
            #expect(try await h.challengeExists(keyId: other.keyId, challenge: otherC))

            // Malformed challenge text.
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 10, challenge: "../../*").get().rejection
                == .unknownChallenge)
            #expect(try await s.keyRecord(keyId: key.keyId).get()?.counter == 1)

            // Consumed even when the counter check then fails.
            let c2 = try await Fixtures.assertChallenge(key.keyId, in: s)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 1, challenge: c2).get().rejection
                == .counterReplay)
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: c2) == false)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 3, challenge: c2).get().rejection
                == .unknownChallenge)

            // The other key's challenge still works for its own key.
            #expect(try await s.commitAssertion(keyId: other.keyId, counter: 1, challenge: otherC).get().isAccepted)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func revokedKeyIsRefusedAndKeepsItsChallenge(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            #expect(try await s.revokeKey(keyId: Fixtures.randomBytes(32)).get() == nil)
            let key = Fixtures.newKey(userId: "revoked-user")
            _ = try await Fixtures.register(key, in: s)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 4, challenge: nil).get().isAccepted)
            let record = try #require(try await s.revokeKey(keyId: key.keyId).get())
            #expect(record.revoked)
            #expect(record.counter == 4)
            #expect(record.userId == "revoked-user")
            let c = try await Fixtures.assertChallenge(key.keyId, in: s)
            let r = try await s.commitAssertion(keyId: key.keyId, counter: 9, challenge: c).get()
            #expect(r.rejection == .revokedKey)
            #expect(r.state?.revoked == true)
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: c))
            #expect(try await s.keyRecord(keyId: key.keyId).get()?.counter == 4)
            // Revoking twice is harmless.
            #expect(try await s.revokeKey(keyId: key.keyId).get()?.revoked == true)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func receiptAndRiskMetricComeBackWithCommits(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            #expect(try await s.storeReceipt(keyId: Fixtures.randomBytes(32), receipt: [1], riskMetric: 3, at: 5).get()
                == false)
            let key = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: s)
            #expect(try await s.storeReceipt(keyId: key.keyId, receipt: [1, 2, 3], riskMetric: 7, at: 1_763_700_100).get())
            let r = try await s.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get()
            #expect(r.state?.riskMetric == 7)
            #expect(r.state?.riskMetricAt == 1_763_700_100)
            let record = try #require(try await s.keyRecord(keyId: key.keyId).get())
            #expect(record.riskMetric == 7)
            #expect(record.riskMetricAt == 1_763_700_100)
            // A receipt without a metric keeps the last metric.
            #expect(try await s.storeReceipt(keyId: key.keyId, receipt: [4], riskMetric: nil, at: 1_763_800_000).get())
            #expect(try await s.keyRecord(keyId: key.keyId).get()?.riskMetricAt == 1_763_700_100)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func receiptRefreshSourceCarriesTheLatestReceipt(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            #expect(try await s.receiptRefreshSource(keyId: Fixtures.randomBytes(32)).get() == nil)
            var key = Fixtures.newKey()
            key.receiptNotBefore = 1_763_786_400
            _ = try await Fixtures.register(key, in: s)
            let first = try #require(try await s.receiptRefreshSource(keyId: key.keyId).get())
            #expect(first == ReceiptRefreshSource(
                receipt: try #require(key.receipt), publicKey: key.publicKey, appId: key.appId, environment: key.environment,
                revoked: false, notBefore: 1_763_786_400))
            #expect(try await s.storeReceipt(
                keyId: key.keyId, receipt: [9, 9], riskMetric: 2, at: 1_763_800_000, notBefore: 1_763_886_400,
                expiry: 1_766_400_000).get())
            let second = try #require(try await s.receiptRefreshSource(keyId: key.keyId).get())
            #expect(second.receipt == [9, 9])
            #expect(second.notBefore == 1_763_886_400)
            // A receipt without a not-before time clears the old one.
            #expect(try await s.storeReceipt(keyId: key.keyId, receipt: [8], riskMetric: nil, at: 1_763_900_000).get())
            #expect(try await s.receiptRefreshSource(keyId: key.keyId).get()?.notBefore == nil)
            _ = try await s.revokeKey(keyId: key.keyId).get()
            #expect(try await s.receiptRefreshSource(keyId: key.keyId).get()?.revoked == true)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func theRefreshScheduleHandsOutDueKeysOncePerLease(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            let (a, b, c) = (Fixtures.randomBytes(32), Fixtures.randomBytes(32), Fixtures.randomBytes(32))
            try await s.scheduleReceiptRefresh(keyId: a, at: 100).get()
            try await s.scheduleReceiptRefresh(keyId: b, at: 200).get()
            try await s.scheduleReceiptRefresh(keyId: c, at: 300).get()
            #expect(try await s.claimDueReceiptRefreshes(now: 50, lease: 1000, limit: 100).get().isEmpty)
            #expect(try await s.claimDueReceiptRefreshes(now: 150, lease: 1000, limit: 100).get() == [a])
            // Leased until 1150: not handed out again before then.
            #expect(try await s.claimDueReceiptRefreshes(now: 250, lease: 1000, limit: 100).get() == [b])
            // Re-scheduling replaces the time; cancelling removes the key.
            try await s.scheduleReceiptRefresh(keyId: c, at: 5000).get()
            try await s.cancelReceiptRefresh(keyId: b).get()
            #expect(try await s.claimDueReceiptRefreshes(now: 1200, lease: 1000, limit: 100).get() == [a])
            #expect(Set(try await s.claimDueReceiptRefreshes(now: 9000, lease: 10, limit: 100).get()) == [a, c])
            await #expect(throws: StoreError.invalidArgument("keyId must be 32 bytes")) {
                try await s.scheduleReceiptRefresh(keyId: [1, 2], at: 1).get()
            }
            // Registration can put the key on the schedule in the same step.
            var key = Fixtures.newKey(userId: "u-\(backend)")
            key.refreshAt = 20_000
            _ = try await Fixtures.register(key, in: s)
            var unscheduled = Fixtures.newKey()
            unscheduled.refreshAt = nil
            _ = try await Fixtures.register(unscheduled, in: s)
            #expect(try await s.claimDueReceiptRefreshes(now: 30_000, lease: 10, limit: 100).get().contains(key.keyId))
            #expect(try await s.claimDueReceiptRefreshes(now: 30_000, lease: 10, limit: 100).get().isEmpty)
            #expect(try await s.keyRecord(keyId: key.keyId).get()?.userId == "u-\(backend)")
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func concurrentClaimsNeverShareAKey(_ backend: StoreBackend) async throws {
        try await withStore(backend, loops: 2) { h in
            let keys = (0..<60).map { _ in Fixtures.randomBytes(32) }
            for (i, k) in keys.enumerated() { try await h.store.scheduleReceiptRefresh(keyId: k, at: Int64(i)).get() }
            let stores = h.stores
            var claimed: [[UInt8]] = []
            // Small batches from two loops at once until the schedule is empty.
            try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
                for store in stores {
                    group.addTask {
                        var mine: [[UInt8]] = []
                        while true {
                            let batch = try await store.claimDueReceiptRefreshes(now: 100, lease: 10_000, limit: 8).get()
                            if batch.isEmpty { return mine }
                            mine += batch
                        }
                    }
                }
                for try await part in group { claimed += part }
            }
            #expect(claimed.count == keys.count)
            #expect(Set(claimed) == Set(keys))
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func pingAndUnknownLookups(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            try await h.store.ping().get()
            #expect(try await h.store.loadKey(keyId: Fixtures.randomBytes(32)).get() == nil)
            #expect(try await h.store.keyRecord(keyId: Fixtures.randomBytes(32)).get() == nil)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func keyIdsMustBe32Bytes(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            await #expect(throws: StoreError.invalidArgument("keyId must be 32 bytes")) {
                try await h.store.commitAssertion(keyId: [1, 2, 3], counter: 1, challenge: nil).get()
            }
            await #expect(throws: StoreError.self) {
                try await h.store.issueChallenge(keyId: Fixtures.randomBytes(31), purpose: .assert,
                    challenge: StoreChallenge.generate(), ttl: .seconds(1)).get()
            }
            await #expect(throws: StoreError.self) {
                try await h.store.issueChallenge(keyId: Fixtures.randomBytes(32), purpose: .assert,
                    challenge: "short", ttl: .seconds(1)).get()
            }
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func challengesExpireAfterTheirTTL(_ backend: StoreBackend) async throws {
        try await withStore(backend) { h in
            let s = h.store
            let key = Fixtures.newKey()
            let ttl = TimeAmount.seconds(1)
            let attestC = StoreChallenge.generate()
            let issued = NIODeadline.now()
            try await s.issueChallenge(keyId: key.keyId, purpose: .attest, challenge: attestC, ttl: ttl).get()
            // Still there before the TTL passes (the manual clock has not moved). Against Redis
            // on a loaded host the check itself may come later than the TTL: only then may it be gone.
            let present = try await h.challengeExists(keyId: key.keyId, challenge: attestC)
            #expect(present || NIODeadline.now() - issued >= ttl)
            try await h.letExpire(keyId: key.keyId, challenge: attestC, ttl: ttl)
            #expect(try await s.registerKey(key, attestChallenge: attestC).get() == .rejected(.unknownChallenge))

            _ = try await Fixtures.register(key, in: s)
            let assertC = StoreChallenge.generate()
            try await s.issueChallenge(keyId: key.keyId, purpose: .assert, challenge: assertC, ttl: ttl).get()
            try await h.letExpire(keyId: key.keyId, challenge: assertC, ttl: ttl)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 1, challenge: assertC).get().rejection
                == .unknownChallenge)
            #expect(try await s.keyRecord(keyId: key.keyId).get()?.counter == 0)
        }
    }

    @Test func memoryStoreHonoursTTLToTheTick() async throws {
        try await withStore(.memory) { h in
            let key = Fixtures.newKey()
            let c = StoreChallenge.generate()
            try await h.store.issueChallenge(keyId: key.keyId, purpose: .attest, challenge: c, ttl: .seconds(120)).get()
            h.clock?.advance(by: .seconds(119))
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: c))
            h.clock?.advance(by: .seconds(1))
            #expect(try await h.challengeExists(keyId: key.keyId, challenge: c) == false)
        }
    }

    // MARK: races

    @Test(arguments: StoreBackend.allCases)
    func concurrentCommitsNeverAcceptACounterTwice(_ backend: StoreBackend) async throws {
        try await withStore(backend, loops: 4, connections: 2) { h in
            let key = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: h.store)
            let stores = h.stores
            // 1,000 commits, counters 1...250 each sent 4 times, shuffled, spread over loops.
            var counters: [UInt32] = []
            for c in 1...250 { counters += [UInt32(c), UInt32(c), UInt32(c), UInt32(c)] }
            counters.shuffle()
            var futures: [EventLoopFuture<CommitResult>] = []
            for (i, counter) in counters.enumerated() {
                let store = stores[i % stores.count]
                futures.append(
                    store.eventLoop.flatSubmit {
                        store.commitAssertion(keyId: key.keyId, counter: counter, challenge: nil)
                    })
            }
            var accepted: [UInt32] = []
            for (counter, f) in zip(counters, futures) {
                let r = try await f.get()
                if r.isAccepted {
                    accepted.append(counter)
                } else {
                    #expect(r.rejection == .counterReplay)
                }
            }
            #expect(Set(accepted).count == accepted.count, "a counter value was accepted twice")
            #expect(accepted.contains(250))
            #expect(try await h.store.keyRecord(keyId: key.keyId).get()?.counter == 250)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func aChallengeSpentConcurrentlyIsAcceptedOnce(_ backend: StoreBackend) async throws {
        try await withStore(backend, loops: 4, connections: 2) { h in
            let key = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: h.store)
            let c = try await Fixtures.assertChallenge(key.keyId, in: h.store)
            let stores = h.stores
            var futures: [EventLoopFuture<CommitResult>] = []
            for i in 0..<50 {
                let store = stores[i % stores.count]
                futures.append(
                    store.eventLoop.flatSubmit {
                        store.commitAssertion(keyId: key.keyId, counter: UInt32(i + 1), challenge: c)
                    })
            }
            var acceptedCount = 0
            for f in futures {
                let r = try await f.get()
                if r.isAccepted { acceptedCount += 1 } else { #expect(r.rejection == .unknownChallenge) }
            }
            #expect(acceptedCount == 1)
        }
    }
}
