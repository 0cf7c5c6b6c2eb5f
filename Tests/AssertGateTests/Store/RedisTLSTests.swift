import AssertGateRedis
import AssertGateTestSupport
import GatewayTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateCore

/// `rediss://` against a real redis-server with a TLS port (the store
/// conformance suite runs over it as backend `redisTLS`); here: every way the
/// connection must be refused, each with a reason an operator can act on.
@Suite("Redis over TLS", .serialized, .timeLimit(.minutes(2)))
struct RedisTLSTests {
    /// A TLS Redis (client certificate required unless told otherwise).
    private func server(requireClientCertificate: Bool = true) async throws -> (RedisServerFixture, TestPKI) {
        let pki = try await TestPKI.shared.value
        let server = try RedisServerFixture(tls: pki.redisServer(requireClientCertificate: requireClientCertificate))
        return (server, pki)
    }

    /// The outcome of one SET through a client with `tls`, and what Redis holds afterwards.
    private func set(on server: RedisServerFixture, tls: ClientTLSConfig?) async throws -> Result<RESPValue, any Error> {
        var redis = RedisConfig()
        redis.url = try #require(server.tlsURL)
        redis.tls = tls
        redis.connectTimeout = .seconds(2)
        redis.commandTimeout = .seconds(2)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = RedisClient(configuration: try RedisClientConfiguration(redis), eventLoop: group.next())
        let result: Result<RESPValue, any Error>
        do {
            result = .success(try await client.send("SET", "tls-probe", "1").get())
        } catch {
            result = .failure(error)
        }
        try await client.shutdown().get()
        try await group.shutdownGracefully()
        return result
    }

    private func connectFailure(_ result: Result<RESPValue, any Error>) -> String? {
        if case .failure(RedisError.unavailable(.connectFailed(let reason))) = result { return reason }
        return nil
    }

    private func files(_ pki: TestPKI, ca: String? = nil, clientCertificate: Bool = true, serverName: String? = nil)
        -> ClientTLSConfig
    {
        var tls = ClientTLSConfig()
        tls.caFile = ca ?? pki.caCertificate
        if clientCertificate {
            tls.certificate = pki.clientCertificate
            tls.privateKey = pki.clientKey
        }
        tls.serverName = serverName
        return tls
    }

    @Test func aTrustedServerWithTheRightNameIsUsed() async throws {
        let (server, pki) = try await server()
        defer { server.stop() }
        let result = try await set(on: server, tls: files(pki))
        #expect(try result.get() == .status("OK"))
        #expect(try server.text("GET", "tls-probe") == "1")
    }

    @Test func aServerSignedByAnotherCAIsRefusedAndNothingIsWritten() async throws {
        let (server, pki) = try await server()
        defer { server.stop() }
        let result = try await set(on: server, tls: files(pki, ca: pki.otherCACertificate))
        let reason = try #require(connectFailure(result), "expected a connect failure, got \(result)")
        #expect(reason.contains("certificate verification"), "\(reason)")
        #expect(reason.contains("127.0.0.1:\(server.tlsPort ?? 0)"), "\(reason)")
        #expect(try server.run(["EXISTS", "tls-probe"]) == .integer(0))
    }

    @Test func withoutACAFileTheSystemTrustStoreDecidesAndRefusesATestCA() async throws {
        let (server, pki) = try await server()
        defer { server.stop() }
        var tls = files(pki)
        tls.caFile = nil
        let result = try await set(on: server, tls: tls)
        let reason = try #require(connectFailure(result), "expected a connect failure, got \(result)")
        #expect(reason.contains("certificate verification"), "\(reason)")
    }

    @Test func aNameTheCertificateDoesNotCarryIsRefused() async throws {
        let (server, pki) = try await server()
        defer { server.stop() }
        let result = try await set(on: server, tls: files(pki, serverName: "redis.internal"))
        let reason = try #require(connectFailure(result), "expected a connect failure, got \(result)")
        #expect(reason.contains("hostname mismatch"), "\(reason)")
    }

    @Test func serverNameOverridesTheURLHost() async throws {
        // The URL says 127.0.0.1; the certificate also names localhost (a DNS name: SNI is sent).
        let (server, pki) = try await server()
        defer { server.stop() }
        let result = try await set(on: server, tls: files(pki, serverName: "localhost"))
        #expect(try result.get() == .status("OK"))
    }

    @Test func aRedisThatRequiresAClientCertificateRefusesNone() async throws {
        let (server, pki) = try await server(requireClientCertificate: true)
        defer { server.stop() }
        let result = try await set(on: server, tls: files(pki, clientCertificate: false))
        guard case .failure(RedisError.unavailable) = result else {
            Issue.record("expected the store to be unavailable, got \(result)")
            return
        }
        #expect(try server.run(["EXISTS", "tls-probe"]) == .integer(0))
    }

    @Test func aRedisThatAsksNoClientCertificateNeedsNone() async throws {
        let (server, pki) = try await server(requireClientCertificate: false)
        defer { server.stop() }
        let result = try await set(on: server, tls: files(pki, clientCertificate: false))
        #expect(try result.get() == .status("OK"))
    }

    @Test func aPlainClientCannotTalkToTheTLSPort() async throws {
        // Guards the suite itself: the TLS port really speaks only TLS.
        let (server, _) = try await server(requireClientCertificate: false)
        defer { server.stop() }
        let port = try #require(server.tlsPort)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let config = RedisClientConfiguration(
            url: try RedisURL(parsing: "redis://127.0.0.1:\(port)/0"), connectTimeout: .seconds(1),
            commandTimeout: .milliseconds(500))
        let client = RedisClient(configuration: config, eventLoop: group.next())
        await #expect(throws: RedisError.self) { _ = try await client.send("SET", "tls-probe", "1").get() }
        try await client.shutdown().get()
        try await group.shutdownGracefully()
        #expect(try server.run(["EXISTS", "tls-probe"]) == .integer(0))
    }

    @Test func aRefusedServerIsLoggedOnceWithTheReason() async throws {
        let (server, pki) = try await server()
        defer { server.stop() }
        let sink = MemoryLogSink()
        let control = LogControl(level: .info, format: .text)
        var redis = RedisConfig()
        redis.url = try #require(server.tlsURL)
        redis.tls = files(pki, serverName: "redis.internal")
        var configuration = try RedisClientConfiguration(redis)
        configuration.logger = Logger(label: "gw") { GatewayLogHandler(label: $0, control: control, sink: sink) }
        configuration.backoffBase = .milliseconds(5)
        configuration.backoffMax = .milliseconds(20)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = RedisClient(configuration: configuration, eventLoop: group.next())
        // Several failed attempts (each a fast failure while backing off, or a refused handshake).
        for _ in 0..<20 {
            _ = try? await client.send("PING").get()
            try await Task.sleep(for: .milliseconds(10))
        }
        let warnings = sink.lines.filter { $0.contains("redis connection failed") }
        #expect(warnings.count == 1, "\(sink.lines)")
        #expect(warnings.first?.contains("hostname mismatch") == true, "\(warnings)")
        #expect(warnings.first?.contains("rediss://127.0.0.1:\(server.tlsPort ?? 0)/0") == true, "\(warnings)")
        try await client.shutdown().get()
        try await group.shutdownGracefully()
    }

    @Test func aServerThatNeverFinishesTheHandshakeHoldsNoConnectionOpen() async throws {
        // TCP is accepted, the ClientHello is swallowed: every attempt must be
        // closed at connectTimeout, not left open while the next one starts.
        let pki = try await TestPKI.shared.value
        let counts = NIOLockedValueBox((opened: 0, closed: 0))
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let silent = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                counts.withLockedValue { $0.opened += 1 }
                channel.closeFuture.whenComplete { _ in counts.withLockedValue { $0.closed += 1 } }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        var redis = RedisConfig()
        redis.url = "rediss://127.0.0.1:\(silent.localAddress?.port ?? 0)/0"
        redis.tls = files(pki)
        redis.connectTimeout = .milliseconds(150)
        var configuration = try RedisClientConfiguration(redis)
        configuration.backoffBase = .milliseconds(5)
        configuration.backoffMax = .milliseconds(10)
        let client = RedisClient(configuration: configuration, eventLoop: group.next())
        let deadline = NIODeadline.now() + .seconds(20)
        while counts.withLockedValue({ $0.opened }) < 5 {
            _ = try? await client.send("PING").get()
            guard NIODeadline.now() < deadline else { break }
        }
        let (opened, closed) = counts.withLockedValue { ($0.opened, $0.closed) }
        #expect(opened >= 5)
        // At most the attempt in progress (and one being replaced) is open.
        #expect(opened - closed <= 2, "opened \(opened), closed \(closed)")
        try await client.shutdown().get()
        try await silent.close()
        try await group.shutdownGracefully()
    }

    @Test func unusableTLSFilesAreConfigurationErrors() async throws {
        let pki = try await TestPKI.shared.value
        do {
            _ = try TLSClientContext(caFile: "/nonexistent/ca.pem", certificatePath: nil, privateKeyPath: nil)
            Issue.record("a missing CA file was accepted")
        } catch {
            guard case .caFile(let path, _) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(path == "/nonexistent/ca.pem")
        }
        // The client key of another certificate.
        do {
            _ = try TLSClientContext(caFile: pki.caCertificate, certificatePath: pki.clientCertificate, privateKeyPath: pki.serverKey)
            Issue.record("a key of another certificate was accepted")
        } catch {
            guard case .keyMismatch = error else {
                Issue.record("wrong error \(error)")
                return
            }
        }
    }
}
