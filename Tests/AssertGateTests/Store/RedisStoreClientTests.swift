import AssertGateRedis
import AssertGateTestSupport
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateCore

/// The Redis client as the gateway uses it: through `RedisStore` (scripts,
/// one round trip per commit) and with the gateway's log handler.
@Suite("Redis client in the gateway", .timeLimit(.minutes(2)))
struct RedisStoreClientTests {
    @Test func scriptFlushIsHealedByOneReload() async throws {
        try await withStore(.redis) { h in
            let s = h.store
            let key = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: s)
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 1, challenge: nil).get().isAccepted)
            let server = try #require(h.server)
            #expect(try server.text("SCRIPT", "FLUSH") == "OK")
            #expect(try server.run(["SCRIPT", "EXISTS", RedisStoreScripts.commit.sha1]) == .array([.integer(0)]))
            #expect(try await s.commitAssertion(keyId: key.keyId, counter: 2, challenge: nil).get().isAccepted)
            #expect(try server.run(["SCRIPT", "EXISTS", RedisStoreScripts.commit.sha1]) == .array([.integer(1)]))
            #expect(try await s.keyRecord(keyId: key.keyId).get()?.counter == 2)
        }
    }

    @Test func eachCommitIsExactlyOneEVALSHA() async throws {
        try await withStore(.redis) { h in
            let s = h.store
            let key = Fixtures.newKey()
            _ = try await Fixtures.register(key, in: s)
            let server = try #require(h.server)
            try server.text("CONFIG", "RESETSTAT")
            for i in 1...10 {
                _ = try await s.commitAssertion(keyId: key.keyId, counter: UInt32(i), challenge: nil).get()
            }
            // Redis counts the commands a script runs too: one EVALSHA per commit
            // and one HMGET/HSET per script run means no extra round trip.
            let stats = try server.text("INFO", "commandstats")
            var calls: [String: Int] = [:]
            for line in stats.split(whereSeparator: \.isNewline) where line.hasPrefix("cmdstat_") {
                let name = line.dropFirst("cmdstat_".count).prefix { $0 != ":" }
                let n = line.split(separator: "calls=").dropFirst().first?.prefix { $0 != "," }
                calls[String(name)] = n.flatMap { Int($0) }
            }
            calls["info"] = nil
            calls["config|resetstat"] = nil
            #expect(calls == ["evalsha": 10, "hmget": 10, "hset": 10], "\(calls)")
        }
    }

    @Test func anOutageIsLoggedWhenItStartsAndWhenItEnds() async throws {
        let server = try RedisServerFixture()
        defer { server.stop() }
        let sink = MemoryLogSink()
        let control = LogControl(level: .info, format: .text)
        var config = RedisClientConfiguration(
            url: try RedisURL(parsing: server.url), connectTimeout: .milliseconds(500), commandTimeout: .milliseconds(500))
        config.logger = Logger(label: "gw") { GatewayLogHandler(label: $0, control: control, sink: sink) }
        config.backoffBase = .milliseconds(5)
        config.backoffMax = .milliseconds(20)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let c = RedisClient(configuration: config, eventLoop: group.next())
        #expect(try await c.send("PING").get() == .status("PONG"))
        #expect(sink.lines.isEmpty, "\(sink.lines)")
        server.stop()
        // Commands fail while it is down; a few reconnect attempts fail too.
        for _ in 0..<10 {
            _ = try? await c.send("PING").get()
            try await Task.sleep(for: .milliseconds(10))
        }
        try server.start()
        let deadline = NIODeadline.now() + .seconds(10)
        while (try? await c.send("PING").get()) != .status("PONG") {
            guard NIODeadline.now() < deadline else { throw RedisClientTestError("no reconnect within 10 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
        let lines = sink.lines
        #expect(lines.filter { $0.contains("warning") && $0.contains("redis connection lost") }.count == 1, "\(lines)")
        #expect(lines.filter { $0.contains("warning") && $0.contains("redis connection failed") }.count <= 1, "\(lines)")
        #expect(lines.filter { $0.contains("info") && $0.contains("redis connection restored") }.count == 1, "\(lines)")
        #expect(lines.allSatisfy { $0.contains("redis=redis://127.0.0.1:\(server.port)/0") }, "\(lines)")
        try await c.shutdown().get()
        try await group.shutdownGracefully()
    }
}

private struct RedisClientTestError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
