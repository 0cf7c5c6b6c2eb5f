import AssertGateTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateRedis

/// The cluster client's own pieces: slots computed like Redis, redirects
/// and slot maps parsed, a shutdown that leaves no node client behind.
/// (Redirects followed under load, failover and the whole store contract
/// over a cluster are in AssertGateTests, through `RedisStore`.)
@Suite("Redis Cluster client", .timeLimit(.minutes(2)))
struct RedisClusterClientTests {
    @Test func hashSlotsAreRedisOwn() throws {
        #expect(RedisHashSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        for n in 0..<40 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255) }
            #expect(RedisHashSlot.slot(ofBase64URLOf: bytes) == RedisHashSlot.slot(ofTag: base64URL(bytes)))
        }
        let cluster = try RedisClusterFixture(masters: 1)
        defer { cluster.stop() }
        var keys = ["foo", "{user1000}.following", "{}", "{}{x}", "{{a}}", "a{b}c{d}", "{", "}{a}", "x{}y{z}", "é{ü}"]
        for _ in 0..<200 {
            let keyId = (0..<32).map { _ in UInt8.random(in: 0...255) }
            keys.append("ag:{\(base64URL(keyId))}:key")
            keys.append(String(decoding: (0..<Int.random(in: 0...12)).map { _ in UInt8.random(in: 0x20...0x7E) }, as: UTF8.self))
        }
        for key in keys {
            let theirs = try cluster.nodes[0].run(["CLUSTER", "KEYSLOT", key]).int64
            #expect(theirs == Int64(RedisHashSlot.slot(forKey: key)), "\(key)")
        }
    }

    @Test func redirectsAndSlotMapsParse() throws {
        #expect(RedisRedirect(errorMessage: "MOVED 3999 127.0.0.1:6381", defaultHost: "h")
            == .moved(slot: 3999, to: RedisNodeAddress(host: "127.0.0.1", port: 6381)))
        #expect(RedisRedirect(errorMessage: "ASK 1 :7000", defaultHost: "10.0.0.1")
            == .ask(slot: 1, to: RedisNodeAddress(host: "10.0.0.1", port: 7000)))
        #expect(RedisRedirect(errorMessage: "MOVED 7 ::1:7001", defaultHost: "h")
            == .moved(slot: 7, to: RedisNodeAddress(host: "::1", port: 7001)))
        for bad in ["MOVED", "MOVED 16384 a:1", "MOVED 1 ?:7000", "MOVED 1 a:0", "MOVED 1 a", "ASK x a:1", "ERR 1 a:1", "MOVED 1 a:1 extra"] {
            #expect(RedisRedirect(errorMessage: bad, defaultHost: "h") == nil, "\(bad)")
        }
        let reply = RESPValue.array([
            .array([.integer(0), .integer(99), .array([.bulk(Array("10.0.0.1".utf8)), .integer(7000), .bulk([])])]),
            .array([.integer(100), .integer(16000), .array([.bulk([]), .integer(7001)])]),
            .array([.integer(16001), .integer(16383), .array([.bulk(Array("?".utf8)), .integer(7002)])]),
        ])
        let t = try RedisClusterTopology(clusterSlots: reply, askedHost: "seed")
        #expect(t.masters[99] == RedisNodeAddress(host: "10.0.0.1", port: 7000))
        #expect(t.masters[100] == RedisNodeAddress(host: "seed", port: 7001))
        #expect(t.distinctMasters.count == 2)
        #expect(t.masters[16001] == nil, "an unknown endpoint serves nothing")
        for bad: RESPValue in [.integer(1), .array([.array([.integer(5), .integer(1), .array([.bulk([]), .integer(1)])])]),
            .array([.array([.integer(0), .integer(16384), .array([.bulk([]), .integer(1)])])])]
        {
            #expect(throws: RedisError.self) { try RedisClusterTopology(clusterSlots: bad, askedHost: "seed") }
        }
    }

    @Test func shutdownDuringAMapRefreshLeavesNoClientBehind() async throws {
        // The first seed holds CLUSTER SLOTS unanswered; the shutdown fails
        // it, and the refresh must not go on to connect the second seed.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let asked = loop.makePromise(of: Void.self)
        let never = loop.makePromise(of: String.self)
        let first = try await ScriptedRedisServer(group: group) { _, command in
            if command.first?.uppercased() == "CLUSTER" {
                asked.succeed()
                return never.futureResult
            }
            return loop.makeSucceededFuture("$1\r\nx\r\n")
        }
        let second = try await ScriptedRedisServer(group: group) { _, _ in loop.makeSucceededFuture("-ERR no\r\n") }
        // A command timeout the test never reaches: on a loaded host the
        // unanswered CLUSTER SLOTS must end by the shutdown, not by timing out
        // (after which trying the second seed would be right).
        let config = RedisClientConfiguration(
            url: RedisURL(host: "127.0.0.1", port: first.port), connectTimeout: .seconds(2), commandTimeout: .seconds(60))
        let client = RedisClusterClient(
            configuration: config, seeds: [first.port, second.port].map { RedisNodeAddress(host: "127.0.0.1", port: $0) },
            eventLoop: loop)
        try await asked.futureResult.get()
        try await client.shutdown().get()
        #expect(try await client.nodeClientCount.get() == 0)
        #expect(second.connectionCount == 0)
        never.fail(RedisError.unavailable(.shutdown))
        try await first.close()
        try await second.close()
        try await group.shutdownGracefully()
    }
}

/// Unpadded b64url, as the store names its keys.
private func base64URL(_ bytes: [UInt8]) -> String {
    var buffer = ByteBuffer()
    RedisBase64URL.encode(bytes, into: &buffer)
    return String(buffer: buffer)
}
