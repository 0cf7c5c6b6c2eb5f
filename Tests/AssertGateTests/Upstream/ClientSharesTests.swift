import Testing

@testable import AssertGateCore

struct ClientSharesTests {
    @Test func countsEachClientApart() {
        var s = ClientShares()
        s.take("10.0.0.1")
        s.take("10.0.0.1")
        s.take("10.0.0.2")
        #expect(s.count("10.0.0.1") == 2)
        #expect(s.count("10.0.0.2") == 1)
        #expect(s.count("10.0.0.3") == 0)
        #expect(s.count(nil) == 0)
        s.give("10.0.0.1")
        #expect(s.count("10.0.0.1") == 1)
        #expect(s.count("10.0.0.2") == 1)  // the cached share is not the one asked for
    }

    @Test func aShareThatDropsToZeroAndComesBackCountsFromOne() {
        var s = ClientShares()
        s.take("a")
        s.give("a")
        #expect(s.count("a") == 0)
        s.give("a")  // nothing held: no negative count
        #expect(s.count("a") == 0)
        s.take("a")
        #expect(s.count("a") == 1)
        // Another client in between evicts the cache; the table still counts right.
        s.take("b")
        s.give("a")
        s.take("a")
        #expect(s.count("a") == 1)
        #expect(s.count("b") == 1)
    }

    @Test func manyClientsInterleavedKeepTheirCounts() {
        var s = ClientShares()
        var expected: [String: Int] = [:]
        var rng = SystemRandomNumberGenerator()
        let clients = (0..<5).map { "10.0.0.\($0)" }
        for _ in 0..<2000 {
            let c = clients[Int.random(in: 0..<clients.count, using: &rng)]
            if Bool.random(using: &rng) {
                s.take(c)
                expected[c, default: 0] += 1
            } else {
                s.give(c)
                if let n = expected[c], n > 0 { expected[c] = n - 1 }
            }
            for d in clients { #expect(s.count(d) == expected[d, default: 0]) }
        }
    }

    @Test func withoutAnAddressNothingIsCounted() {
        var s = ClientShares()
        s.take(nil)
        s.give(nil)
        #expect(s.count(nil) == 0)
    }
}
