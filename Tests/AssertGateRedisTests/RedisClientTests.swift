import AssertGateTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateRedis

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
    if case RedisError.unavailable = error { return true }
    return false
}

@Suite("Redis client against real and fake servers", .timeLimit(.minutes(2)))
struct RedisClientTests {
    private func client(
        port: Int, group: EventLoopGroup, database: Int = 0, password: String? = nil,
        commandTimeout: TimeAmount = .milliseconds(250), scripts: [RedisScript] = []
    ) throws -> RedisClient {
        let config = RedisClientConfiguration(
            url: RedisURL(host: "127.0.0.1", port: port, password: password, database: database),
            connectTimeout: .milliseconds(500), commandTimeout: commandTimeout)
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
            guard case RedisError.unavailable(.protocolViolation) = error else {
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
        let good = try client(port: server.port, group: group, database: 3, password: "s3cret")
        #expect(try await good.send("SET", "probe", "in-db-3").get() == .status("OK"))
        #expect(try server.run(["GET", "probe"], password: "s3cret", database: 3) == .bulk(Array("in-db-3".utf8)))
        #expect(try server.run(["EXISTS", "probe"], password: "s3cret") == .integer(0))
        let bad = try client(port: server.port, group: group, password: "wrong")
        do {
            _ = try await bad.send("PING").get()
            Issue.record("wrong password accepted")
        } catch RedisError.unavailable(.connectFailed(let message)) {
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
            await #expect(throws: RedisError.self) { try await ping.get() }
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
        await #expect(throws: RedisError.unavailable(.timeout)) { try await ping.get() }
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
}
