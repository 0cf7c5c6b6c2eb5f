import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateCore

/// `HostAddressCache` with its lookup and clock in the test's hands.
@Suite struct HostAddressCacheTests {
    /// A lookup that answers what the test sets, counts its calls, and can be
    /// held until the test lets it go.
    final class FakeResolver: Sendable {
        let answer = NIOLockedValueBox<Result<HostAddressCache.Addresses, HostLookupError>>(
            .failure(HostLookupError(host: "-", port: 0, reason: "unset")))
        let calls = NIOLockedValueBox(0)
        let gate = NIOLockedValueBox<DispatchSemaphore?>(nil)
        let clock = NIOLockedValueBox(NIODeadline.uptimeNanoseconds(1_000_000_000))

        func lookup(_ host: String, _ port: Int) throws -> HostAddressCache.Addresses {
            calls.withLockedValue { $0 += 1 }
            gate.withLockedValue { $0 }?.wait()
            return try answer.withLockedValue { $0 }.get()
        }

        func advance(_ t: TimeAmount) { clock.withLockedValue { $0 = $0 + t } }

        func cache() -> HostAddressCache {
            HostAddressCache(
                freshFor: .seconds(10), staleFor: .minutes(10), clock: { self.clock.withLockedValue { $0 } },
                lookup: { try self.lookup($0, $1) })
        }
    }

    static func addresses(_ ip: String, port: Int = 443) throws -> HostAddressCache.Addresses {
        HostAddressCache.Addresses(v4: [try SocketAddress(ipAddress: ip, port: port)], v6: [])
    }

    let loop = MultiThreadedEventLoopGroup.singleton.any()

    @Test func concurrentConnectsShareOneLookupAndAFreshAnswerIsReused() async throws {
        let fake = FakeResolver()
        let cache = fake.cache()
        fake.answer.withLockedValue { $0 = .success(try! Self.addresses("10.0.0.1")) }
        let gate = DispatchSemaphore(value: 0)
        fake.gate.withLockedValue { $0 = gate }
        let waiting = (0..<5).map { _ in cache.addresses(host: "api.example", port: 443, on: loop) }
        gate.signal()
        for f in waiting { #expect(try await f.get() == (try Self.addresses("10.0.0.1"))) }
        #expect(fake.calls.withLockedValue { $0 } == 1)
        #expect(cache.lookups == 1)
        fake.gate.withLockedValue { $0 = nil }

        fake.advance(.seconds(9))
        _ = try await cache.addresses(host: "api.example", port: 443, on: loop).get()
        #expect(cache.lookups == 1, "still fresh")
        // Another port is another entry.
        _ = try await cache.addresses(host: "api.example", port: 8443, on: loop).get()
        #expect(cache.lookups == 2)

        fake.advance(.seconds(2))
        fake.answer.withLockedValue { $0 = .success(try! Self.addresses("10.0.0.2")) }
        #expect(try await cache.addresses(host: "api.example", port: 443, on: loop).get() == (try Self.addresses("10.0.0.2")))
        #expect(cache.lookups == 3, "an answer older than freshFor is asked again")
    }

    @Test func aFailedLookupFallsBackToTheLastAnswerUntilItIsTooOld() async throws {
        let fake = FakeResolver()
        let cache = fake.cache()
        fake.answer.withLockedValue { $0 = .success(try! Self.addresses("10.0.0.1")) }
        _ = try await cache.addresses(host: "api.example", port: 443, on: loop).get()

        fake.advance(.seconds(30))
        fake.answer.withLockedValue { $0 = .failure(HostLookupError(host: "api.example", port: 443, reason: "down")) }
        #expect(try await cache.addresses(host: "api.example", port: 443, on: loop).get() == (try Self.addresses("10.0.0.1")))
        #expect(cache.lookups == 2)
        // A resolver that just failed is not asked again for a while.
        fake.advance(.seconds(4))
        _ = try await cache.addresses(host: "api.example", port: 443, on: loop).get()
        #expect(cache.lookups == 2)
        fake.advance(.seconds(2))
        _ = try await cache.addresses(host: "api.example", port: 443, on: loop).get()
        #expect(cache.lookups == 3)

        // Past staleFor the failure is the answer.
        fake.advance(.minutes(10))
        await #expect(throws: HostLookupError.self) {
            try await cache.addresses(host: "api.example", port: 443, on: self.loop).get()
        }
        // And the resolver's recovery is seen at once.
        fake.answer.withLockedValue { $0 = .success(try! Self.addresses("10.0.0.3")) }
        fake.advance(.seconds(6))
        #expect(try await cache.addresses(host: "api.example", port: 443, on: loop).get() == (try Self.addresses("10.0.0.3")))
    }

    @Test func aHostNeverResolvedFailsEachConnectWithTheResolversReason() async throws {
        let fake = FakeResolver()
        let cache = fake.cache()
        fake.answer.withLockedValue { $0 = .failure(HostLookupError(host: "nowhere", port: 80, reason: "Name or service not known")) }
        for expected in 1...2 {
            do {
                _ = try await cache.addresses(host: "nowhere", port: 80, on: loop).get()
                Issue.record("resolved")
            } catch let e as HostLookupError {
                #expect("\(e)" == "cannot resolve nowhere: Name or service not known")
            }
            #expect(cache.lookups == expected, "no answer to fall back on: asked each time")
        }
    }

    @Test func ipLiteralsAreNotLookedUp() async throws {
        let fake = FakeResolver()
        let cache = fake.cache()
        let v4 = try await cache.addresses(host: "127.0.0.1", port: 80, on: loop).get()
        let v6 = try await cache.addresses(host: "::1", port: 80, on: loop).get()
        #expect(v4.v4.count == 1 && v4.v6.isEmpty)
        #expect(v6.v6.count == 1 && v6.v4.isEmpty)
        #expect(cache.lookups == 0)
    }

    @Test func theSystemLookupReadsHostsEntries() throws {
        // /etc/hosts: no network.
        let answer = try HostAddressCache.systemLookup(host: "localhost", port: 8080)
        let all = answer.v4 + answer.v6
        #expect(!all.isEmpty)
        #expect(all.allSatisfy { $0.port == 8080 })
        #expect(answer.v4.contains { $0.ipAddress == "127.0.0.1" } || answer.v6.contains { $0.ipAddress == "::1" })
    }

    /// The cache is what `ClientBootstrap` asks: a real connect to a
    /// listener named `localhost`, twice, looks it up once.
    @Test func connectsThroughTheCacheLookUpOnce() async throws {
        let server = try await ServerBootstrap(group: loop).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        let cache = HostAddressCache()
        for _ in 0..<2 {
            let channel = try await ClientBootstrap(group: loop).resolver(cache.resolver(on: loop))
                .connect(host: "localhost", port: port).get()
            #expect(channel.remoteAddress?.port == port)
            try await channel.close()
        }
        #expect(cache.lookups == 1)
        try await server.close()
    }
}
