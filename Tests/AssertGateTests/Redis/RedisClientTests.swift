import AssertGateTestSupport
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateCore

/// A server that answers every read with fixed bytes: an evil or broken Redis.
private final class EvilServerHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let reply: String
    init(reply: String) { self.reply = reply }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: reply)), promise: nil)
    }
}

private func isUnavailable(_ error: any Error) -> Bool {
    if case StoreError.unavailable = error { return true }
    return false
}

@Suite("Redis client against real and fake servers", .timeLimit(.minutes(2)))
struct RedisClientTests {
    private func client(
        port: Int, group: EventLoopGroup, path: String = "/0", auth: String = "", commandTimeout: TimeAmount = .milliseconds(250),
        scripts: [RedisScript] = []
    ) throws -> RedisClient {
        let config = RedisClientConfiguration(
            url: try RedisURL(parsing: "redis://\(auth)127.0.0.1:\(port)\(path)"), connectTimeout: .milliseconds(500),
            commandTimeout: commandTimeout)
        return RedisClient(configuration: config, eventLoop: group.next(), scripts: scripts)
    }

    @Test(arguments: ["*100000000\r\n", "$99999999999\r\n", "+" + String(repeating: "x", count: 10000), "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"])
    func anEvilServerCannotMakeUsAllocate(_ reply: String) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { ch in
                ch.eventLoop.makeCompletedFuture { try ch.pipeline.syncOperations.addHandler(EvilServerHandler(reply: reply)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        let c = try client(port: port, group: group)
        do {
            _ = try await c.send("GET", "k").get()
            Issue.record("an oversized reply was accepted")
        } catch {
            guard case StoreError.unavailable(.protocolViolation) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
        }
        try await c.shutdown().get()
        try await server.close()
        try await group.shutdownGracefully()
    }

    @Test func authAndSelectComeFromTheURL() async throws {
        let server = try RedisServerFixture(extraArguments: ["--requirepass", "s3cret"])
        defer { server.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let good = try client(port: server.port, group: group, path: "/3", auth: ":s3cret@")
        #expect(try await good.send("SET", "probe", "in-db-3").get() == .status("OK"))
        #expect(try server.run(["GET", "probe"], password: "s3cret", database: 3) == .bulk(Array("in-db-3".utf8)))
        #expect(try server.run(["EXISTS", "probe"], password: "s3cret") == .integer(0))
        let bad = try client(port: server.port, group: group, auth: ":wrong@")
        do {
            _ = try await bad.send("PING").get()
            Issue.record("wrong password accepted")
        } catch StoreError.unavailable(.connectFailed(let message)) {
            #expect(message.hasPrefix("AUTH"))
            #expect(!message.contains("wrong"))
        }
        try await good.shutdown().get()
        try await bad.shutdown().get()
        try await group.shutdownGracefully()
    }

    @Test func stoppedRedisFailsFastAndTheSameClientRecovers() async throws {
        let server = try RedisServerFixture()
        defer { server.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let timeout = TimeAmount.milliseconds(250)
        let c = try client(port: server.port, group: group, commandTimeout: timeout)
        #expect(try await c.send("PING").get() == .status("PONG"))

        // Traffic in flight while the server goes away.
        let inFlight = (0..<500).map { i in c.send("SET", .string("k\(i)"), "v") }
        server.stop()
        var failures = 0
        for f in inFlight {
            do { _ = try await f.get() } catch {
                #expect(isUnavailable(error), "\(error)")
                failures += 1
            }
        }
        // Some may have been answered before the stop; after it, nothing hangs.
        for _ in 0..<20 {
            let t0 = NIODeadline.now()
            let ping = c.send("PING")
            let elapsedAtFailure = ping.map { _ in TimeAmount.seconds(999) }.recover { _ in NIODeadline.now() - t0 }
            await #expect(throws: StoreError.self) { try await ping.get() }
            #expect(try await elapsedAtFailure.get() <= timeout)
        }
        _ = failures

        // Same port, same client: it reconnects by itself (polled with a deadline).
        try server.start()
        let deadline = NIODeadline.now() + .seconds(10)
        var recovered = false
        while NIODeadline.now() < deadline {
            if (try? await c.send("PING").get()) == .status("PONG") {
                recovered = true
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(recovered)
        try await c.shutdown().get()
        try await group.shutdownGracefully()
    }

    @Test func aFrozenServerTimesOutWithinTheCommandTimeout() async throws {
        let server = try RedisServerFixture()
        defer { server.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let timeout = TimeAmount.milliseconds(200)
        let c = try client(port: server.port, group: group, commandTimeout: timeout)
        #expect(try await c.send("PING").get() == .status("PONG"))
        server.pause()
        // Measured where the failure happens (on the loop), not when this task resumes.
        let t0 = NIODeadline.now()
        let ping = c.send("PING")
        let elapsedAtFailure = ping.map { _ in TimeAmount.zero }.recover { _ in NIODeadline.now() - t0 }
        await #expect(throws: StoreError.unavailable(.timeout)) { try await ping.get() }
        let elapsed = try await elapsedAtFailure.get()
        #expect(elapsed >= timeout)
        #expect(elapsed < timeout + .milliseconds(500))
        server.resume()
        let deadline = NIODeadline.now() + .seconds(10)
        var recovered = false
        while NIODeadline.now() < deadline {
            if (try? await c.send("PING").get()) == .status("PONG") {
                recovered = true
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(recovered)
        try await c.shutdown().get()
        try await group.shutdownGracefully()
    }

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

    @Test func urlParsing() throws {
        #expect(try RedisURL(parsing: "redis://127.0.0.1:6380/2") == RedisURL(host: "127.0.0.1", port: 6380, database: 2))
        #expect(try RedisURL(parsing: "redis://u:p%40ss@h") == RedisURL(host: "h", username: "u", password: "p@ss"))
        #expect(try RedisURL(parsing: "redis://:pw@[::1]:7000/") == RedisURL(host: "::1", port: 7000, password: "pw"))
        #expect(try RedisURL(parsing: "redis://u:pw@h").description == "redis://u:***@h:6379/0")
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "http://h") }
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "redis://h:0") }
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "redis://h/x") }
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "redis://:6379") }
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
