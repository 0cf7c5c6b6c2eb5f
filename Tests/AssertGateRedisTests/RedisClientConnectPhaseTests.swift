import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateRedis

/// What a command meets while no connection is up: held during an in-flight
/// connect attempt, failed at once (with the last attempt's error) while the
/// backoff timer waits. The fake server holds handshake replies until the
/// test releases them, so each phase is reached by events, never by timing.
@Suite("Redis client while connecting", .timeLimit(.minutes(1)))
struct RedisClientConnectPhaseTests {
    private static let wrongPass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"

    private func client(
        port: Int, loop: EventLoop, connectTimeout: TimeAmount = .seconds(5), backoff: TimeAmount,
        maxQueued: Int = 4096
    ) throws -> RedisClient {
        var config = RedisClientConfiguration(
            url: RedisURL(host: "127.0.0.1", port: port, password: "pw"), connectTimeout: connectTimeout,
            commandTimeout: .seconds(5))
        config.backoffBase = backoff
        config.backoffMax = backoff
        config.maxQueuedWhileConnecting = maxQueued
        return RedisClient(configuration: config, eventLoop: loop)
    }

    /// The flaky `authAndSelectComeFromTheURL`: when the caller's thread reached
    /// the loop only after the first attempt had failed, it got `.notConnected`
    /// instead of the AUTH failure. Now a command issued during the backoff
    /// fails at once with the same error as the commands held during the attempt.
    @Test func aCommandAfterAFailedAttemptFailsAtOnceWithThatAttemptsError() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let authSeen = loop.makePromise(of: Void.self)
        let releaseAuth = loop.makePromise(of: Void.self)
        let server = try await ScriptedRedisServer(group: group) { connection, command in
            if command.first?.uppercased() == "AUTH" {
                if connection == 0 { authSeen.succeed() }
                return releaseAuth.futureResult.map { Self.wrongPass }
            }
            return loop.makeSucceededFuture("+PONG\r\n")
        }
        // 60 s backoff: after the first failure the client sits in backoff for the whole test.
        let c = try client(port: server.port, loop: loop, backoff: .seconds(60))

        let held = c.send("PING")  // the attempt cannot end before the release: held
        try await authSeen.futureResult.get()
        releaseAuth.succeed()
        var heldError: RedisError?
        do { _ = try await held.get() } catch let e as RedisError { heldError = e }
        guard case .unavailable(.connectFailed(let message)) = heldError else {
            Issue.record("held command: \(String(describing: heldError))")
            return
        }
        #expect(message.hasPrefix("AUTH"))
        #expect(!message.contains("pw"))
        let attemptError = RedisError.unavailable(.connectFailed(message))

        let t0 = NIODeadline.now()
        let late = c.send("PING")
        let elapsed = late.map { _ in TimeAmount.seconds(999) }.recover { _ in NIODeadline.now() - t0 }
        await #expect(throws: attemptError) { try await late.get() }
        // Fast: well under the 60 s backoff (a generous bound, so a loaded CI host cannot trip it).
        #expect(try await elapsed.get() < .seconds(2))
        #expect(server.connectionCount == 1, "failing fast must not start an attempt")

        try await c.shutdown().get()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// Right after Redis comes back: commands issued while the reconnect is in
    /// its handshake wait for it instead of failing, up to the queue limit.
    @Test func aReconnectInFlightHoldsCommandsUpToTheQueueLimit() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let secondAuthSeen = loop.makePromise(of: Void.self)
        let releaseSecondAuth = loop.makePromise(of: Void.self)
        let server = try await ScriptedRedisServer(group: group) { connection, command in
            switch (connection, command.first?.uppercased()) {
            case (0, "AUTH"):
                return loop.makeSucceededFuture("+OK\r\n")
            case (_, "AUTH"):
                if connection == 1 { secondAuthSeen.succeed() }
                return releaseSecondAuth.futureResult.map { "+OK\r\n" }
            default:
                return loop.makeSucceededFuture("+PONG\r\n")
            }
        }
        let c = try client(port: server.port, loop: loop, backoff: .milliseconds(1), maxQueued: 2)
        #expect(try await c.send("PING").get() == .status("PONG"))

        try await server.closeConnection(0)
        try await secondAuthSeen.futureResult.get()  // the reconnect is mid-handshake
        let a = c.send("PING")
        let b = c.send("PING")
        let overflow = c.send("PING")
        await #expect(throws: RedisError.unavailable(.overloaded)) { try await overflow.get() }
        releaseSecondAuth.succeed()
        #expect(try await a.get() == .status("PONG"))
        #expect(try await b.get() == .status("PONG"))
        #expect(server.connectionCount == 2)

        try await c.shutdown().get()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A server that accepts TCP but never answers the handshake holds
    /// commands for at most `connectTimeout`, not for the command timeout.
    @Test func anAttemptIsBoundedByTheConnectTimeout() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let never = loop.makePromise(of: Void.self)
        let server = try await ScriptedRedisServer(group: group) { _, _ in
            never.futureResult.map { "+OK\r\n" }
        }
        let connectTimeout = TimeAmount.milliseconds(300)
        // Before the client exists: its attempt (and deadline) starts on the loop at once.
        let t0 = NIODeadline.now()
        let c = try client(port: server.port, loop: loop, connectTimeout: connectTimeout, backoff: .seconds(60))
        let ping = c.send("PING")
        let elapsed = ping.map { _ in TimeAmount.seconds(999) }.recover { _ in NIODeadline.now() - t0 }
        do {
            _ = try await ping.get()
            Issue.record("a silent server answered")
        } catch RedisError.unavailable(.connectFailed(let message)) {
            #expect(message.contains("no connection within"))
        }
        let e = try await elapsed.get()
        #expect(e >= connectTimeout)
        #expect(e < connectTimeout + .seconds(2))

        never.succeed()
        try await c.shutdown().get()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A failover behind a name or virtual IP that keeps old connections:
    /// the demoted server answers `READONLY`. The reply reaches its caller,
    /// and the connection is dropped so the next one reaches the new primary.
    @Test func aReadOnlyReplyDropsTheConnection() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let secondAuth = loop.makePromise(of: Void.self)
        let server = try await ScriptedRedisServer(group: group) { connection, command in
            switch command.first?.uppercased() {
            case "AUTH":
                if connection == 1 { secondAuth.succeed() }
                return loop.makeSucceededFuture("+OK\r\n")
            case "SET":
                return loop.makeSucceededFuture(
                    connection == 0 ? "-READONLY You can't write against a read only replica.\r\n" : "+OK\r\n")
            default:
                return loop.makeSucceededFuture("+PONG\r\n")
            }
        }
        let c = try client(port: server.port, loop: loop, backoff: .milliseconds(10))
        let first = try await c.send("SET", "k", "v").get()
        #expect(first == .error("READONLY You can't write against a read only replica."))
        // A new connection, without a restart; a command during its handshake is held for it.
        try await secondAuth.futureResult.get()
        #expect(try await c.send("SET", "k", "v").get() == .status("OK"))
        #expect(server.connectionCount == 2)
        try await c.shutdown().get()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A server that lets the client connect and then drops it (or times
    /// its commands out) at once: the backoff keeps growing across those
    /// short-lived connections instead of starting over at each handshake.
    @Test func connectionsThatDieAtOnceKeepTheBackoffGrowing() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let auths = NIOLockedValueBox<[EventLoopPromise<Void>]>((0..<5).map { _ in loop.makePromise(of: Void.self) })
        let server = try await ScriptedRedisServer(group: group) { connection, command in
            if command.first?.uppercased() == "AUTH", connection < 5 {
                auths.withLockedValue { $0[connection] }.succeed()
            }
            return loop.makeSucceededFuture("+OK\r\n")
        }
        let c = try client(port: server.port, loop: loop, backoff: .milliseconds(1))
        for i in 0..<4 {
            try await auths.withLockedValue { $0[i] }.futureResult.get()
            // Ready once AUTH is answered; then the server drops it.
            _ = try await c.send("PING").get()
            try await server.closeConnection(i)
        }
        try await auths.withLockedValue { $0[4] }.futureResult.get()
        let attempts = try await c.backoffAttempts().get()
        #expect(attempts == [4], "the backoff started over at each handshake")
        try await c.shutdown().get()
        try await server.close()
        try await group.shutdownGracefully()
    }
}
