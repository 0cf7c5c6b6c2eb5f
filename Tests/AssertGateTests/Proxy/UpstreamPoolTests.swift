import GatewayTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

import AssertGateTestSupport
@testable import AssertGateCore

/// Records lease results; completes a promise on the first.
final class LeaseRecorder: UpstreamExchangeDelegate {
    /// nil = leased (the connection is closed again at once).
    let promise: EventLoopPromise<UpstreamError?>
    init(promise: EventLoopPromise<UpstreamError?>) { self.promise = promise }
    func upstreamLeased(_ connection: any UpstreamExchange) {
        connection.abandon()
        promise.succeed(nil)
    }
    func upstreamLeaseFailed(_ error: UpstreamError) { promise.succeed(error) }
    func upstreamResponseHead(_ head: UpstreamResponseHead) {}
    func upstreamResponseBody(_ buffer: ByteBuffer) {}
    func upstreamResponseTrailers(_ fields: HTTPHeaders) {}
    func upstreamResponseEnd() {}
    func upstreamFailed(_ error: UpstreamError) {}
}

@Suite struct UpstreamPoolTests {
    /// Port 9 on loopback is closed: connect is refused at once.
    static let dead = UpstreamEndpoint(host: "127.0.0.1", port: 9)

    private func lease(
        _ pool: NIOLoopBoundBox<UpstreamPool>, _ config: UpstreamConfig, tls: UpstreamTLS? = nil
    ) async throws -> UpstreamError? {
        let promise = pool.eventLoop.makePromise(of: UpstreamError?.self)
        try await pool.eventLoop.submit {
            pool.value.lease(name: "u", config: config, tls: tls, delegate: LeaseRecorder(promise: promise))
        }.get()
        return try await promise.futureResult.get()
    }

    func makePool(_ loop: EventLoop) -> NIOLoopBoundBox<UpstreamPool> {
        NIOLoopBoundBox.makeBoxSendingValue(UpstreamPool(eventLoop: loop, logger: Logger(label: "t")), eventLoop: loop)
    }

    @Test func refusedConnectsEjectTheEndpoint() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let bound = makePool(loop)
        let config = UpstreamConfig(endpoints: [Self.dead])
        for _ in 0..<ejectAfterFailures {
            let e = try await lease(bound, config)
            #expect(e == .connectFailed)
        }
        let ejected = try await loop.submit { bound.value.endpointPool(upstream: "u", Self.dead).isEjected(now: .now()) }.get()
        #expect(ejected)
        let later = try await loop.submit {
            bound.value.endpointPool(upstream: "u", Self.dead).isEjected(now: .now() + ejectCoolDown + .seconds(1))
        }.get()
        #expect(!later)
        try await group.shutdownGracefully()
    }

    @Test func roundRobinSkipsEjectedEndpoints() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let other = UpstreamEndpoint(host: "127.0.0.1", port: 10)
        let bound = makePool(loop)
        for _ in 0..<ejectAfterFailures {
            _ = try await lease(bound, UpstreamConfig(endpoints: [Self.dead]))
        }
        let config = UpstreamConfig(endpoints: [Self.dead, other])
        let picks = try await loop.submit {
            (0..<6).compactMap { _ in bound.value.pickEndpoint(name: "u", config: config, now: .now())?.endpoint }
        }.get()
        #expect(picks == Array(repeating: other, count: 6))
        try await group.shutdownGracefully()
    }
    /// An `https://` endpoint whose TLS context is missing fails closed: the
    /// lease fails although a cleartext server listens on that very port.
    @Test func anHTTPSEndpointWithoutItsTLSContextIsNeverUsedInCleartext() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        let bound = makePool(group.next())
        #expect(try await lease(bound, UpstreamConfig(endpoints: [UpstreamEndpoint(host: "127.0.0.1", port: port)])) == nil)
        let https = UpstreamConfig(endpoints: [UpstreamEndpoint(host: "127.0.0.1", port: port, tls: true)])
        #expect(try await lease(bound, https, tls: nil) == .connectFailed)
        try await server.close()
        try await group.shutdownGracefully()
    }
    /// A server that accepts TCP and never answers the ClientHello: the
    /// connect (TCP and TLS together) ends at `connectTimeout`, as a timeout.
    @Test func aTLSHandshakeThatNeverFinishesTimesOutTheConnect() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let silent = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        let bound = makePool(group.next())
        var config = UpstreamConfig(endpoints: [UpstreamEndpoint(host: "127.0.0.1", port: port, tls: true)])
        config.connectTimeout = .milliseconds(300)
        let tls = UpstreamTLS(
            context: try TLSClientContext(caFile: nil, certificatePath: nil, privateKeyPath: nil), serverName: nil, generation: 1)
        let started = NIODeadline.now()
        #expect(try await lease(bound, config, tls: tls) == .connectTimeout)
        #expect(NIODeadline.now() - started < .seconds(5))
        try await silent.close()
        try await group.shutdownGracefully()
    }
    /// After a reload, a request still on the older configuration must not
    /// switch the pool back to the older TLS settings: new connections keep
    /// the newest (here the older settings trust another CA and would fail).
    @Test func olderTLSSettingsNeverReplaceNewerOnes() async throws {
        let pki = try await TestPKI.shared.value
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try TLSServerContext(config: TLSConfig(certificate: pki.serverCertificate, privateKey: pki.serverKey))
        let listener = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(OpenSSLHandler(context: server)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(listener.localAddress?.port)
        let bound = makePool(group.next())
        let config = UpstreamConfig(endpoints: [UpstreamEndpoint(host: "127.0.0.1", port: port, tls: true)])
        func settings(ca: String, generation: UInt64) throws -> UpstreamTLS {
            UpstreamTLS(
                context: try TLSClientContext(caFile: ca, certificatePath: nil, privateKeyPath: nil), serverName: nil,
                generation: generation)
        }
        let older = try settings(ca: pki.otherCACertificate, generation: 1)
        let newer = try settings(ca: pki.caCertificate, generation: 2)
        #expect(try await lease(bound, config, tls: newer) == nil)
        #expect(try await lease(bound, config, tls: older) == nil, "the older settings took over")
        // Newer settings do take over, even when they fail.
        #expect(try await lease(bound, config, tls: try settings(ca: pki.otherCACertificate, generation: 3)) == .connectFailed)
        try await listener.close()
        try await group.shutdownGracefully()
    }

    /// Keeps what it was leased (the test releases it).
    final class Holder: UpstreamExchangeDelegate {
        var leased: [any UpstreamExchange] = []
        func upstreamLeased(_ connection: any UpstreamExchange) { leased.append(connection) }
        func upstreamLeaseFailed(_ error: UpstreamError) {}
        func upstreamResponseHead(_ head: UpstreamResponseHead) {}
        func upstreamResponseBody(_ buffer: ByteBuffer) {}
        func upstreamResponseTrailers(_ fields: HTTPHeaders) {}
        func upstreamResponseEnd() {}
        func upstreamFailed(_ error: UpstreamError) {}
    }

    /// A listener that answers nothing and counts the connections it holds.
    final class Counter: Sendable {
        let accepted = NIOLockedValueBox(0)
        let open = NIOLockedValueBox(0)
    }

    func silentListener(_ group: EventLoopGroup, _ counter: Counter) async throws -> Channel {
        try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                counter.accepted.withLockedValue { $0 += 1 }
                counter.open.withLockedValue { $0 += 1 }
                channel.closeFuture.whenComplete { _ in counter.open.withLockedValue { $0 -= 1 } }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// A pool on a silent listener, with the configuration before a reload
    /// (`before`: `from` connections) and after it (`newer`: `to`).
    struct LimitsFixture {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop: EventLoop
        let counter = Counter()
        let listener: Channel
        let bound: NIOLoopBoundBox<UpstreamPool>
        let endpoint: UpstreamEndpoint
        let holder: NIOLoopBoundBox<Holder>
        let before: UpstreamConfig
        let newer: UpstreamConfig

        init(from: Int, to: Int, test: UpstreamPoolTests) async throws {
            loop = group.next()
            listener = try await test.silentListener(group, counter)
            endpoint = UpstreamEndpoint(host: "127.0.0.1", port: try #require(listener.localAddress?.port))
            bound = test.makePool(loop)
            holder = NIOLoopBoundBox.makeBoxSendingValue(Holder(), eventLoop: loop)
            var config = UpstreamConfig(endpoints: [endpoint])
            config.maxConnectionsPerEndpoint = from
            before = config
            config.maxConnectionsPerEndpoint = to
            newer = config
        }

        /// Until `n` leases were granted (the connects are real).
        func waitForLeases(_ n: Int) async throws {
            let holder = self.holder
            for _ in 0..<500 where try await loop.submit({ holder.value.leased.count }).get() < n {
                try await Task.sleep(for: .milliseconds(10))
            }
        }

        func stop() async throws {
            try await listener.close()
            try await group.shutdownGracefully()
        }
    }

    /// A request on the snapshot before a reload leases after it (a bound
    /// body, a store call): its older, larger limit must not come back.
    @Test func aLateLeaseFromAnOlderSnapshotKeepsTheNewerLimits() async throws {
        let f = try await LimitsFixture(from: 8, to: 1, test: self)
        let (bound, holder, before, newer) = (f.bound, f.holder, f.before, f.newer)
        try await f.loop.submit {
            bound.value.lease(name: "u", config: newer, generation: 2, tls: nil, delegate: holder.value)
            for _ in 0..<4 {
                bound.value.lease(name: "u", config: before, generation: 1, tls: nil, delegate: holder.value)
            }
        }.get()
        try await f.waitForLeases(1)
        #expect(try await f.loop.submit { holder.value.leased.count }.get() == 1)
        #expect(try await f.loop.submit { bound.value.waiterCount }.get() == 4, "the older limit (8) let them connect")
        #expect(f.counter.accepted.withLockedValue { $0 } == 1)
        try await f.stop()
    }

    /// A reload that lowers `maxConnectionsPerEndpoint` shrinks the pool:
    /// idle connections over the limit close at the next lease, busy ones
    /// when they come back.
    @Test func aLoweredLimitClosesConnectionsOverIt() async throws {
        let f = try await LimitsFixture(from: 4, to: 1, test: self)
        let (bound, holder, before, newer, endpoint, loop, counter) = (f.bound, f.holder, f.before, f.newer, f.endpoint, f.loop, f.counter)
        try await loop.submit {
            for _ in 0..<4 { bound.value.lease(name: "u", config: before, generation: 1, tls: nil, delegate: holder.value) }
        }.get()
        try await f.waitForLeases(4)
        // Three come back and idle; one stays busy across the reload.
        let idle = try await loop.submit {
            let pool = bound.value.endpointPool(upstream: "u", endpoint)
            for c in holder.value.leased.prefix(3) {
                if let c = c as? UpstreamConnection { pool.release(c) }
            }
            return pool.idleCount
        }.get()
        #expect(idle == 3)
        let second = NIOLoopBoundBox.makeBoxSendingValue(Holder(), eventLoop: loop)
        let afterLease = try await loop.submit {
            bound.value.lease(name: "u", config: newer, generation: 2, tls: nil, delegate: second.value)
            return (bound.value.endpointPool(upstream: "u", endpoint).idleCount, second.value.leased.count, bound.value.waiterCount)
        }.get()
        // Four open, limit one: all three idle ones close; the new lease waits for the busy one.
        #expect(afterLease.0 == 0)
        #expect(afterLease.1 == 0)
        #expect(afterLease.2 == 1)
        // The busy one comes back: over the limit no more, it serves the waiter.
        let served = try await loop.submit {
            let pool = bound.value.endpointPool(upstream: "u", endpoint)
            if let c = holder.value.leased.last as? UpstreamConnection { pool.release(c) }
            return second.value.leased.count
        }.get()
        #expect(served == 1)
        for _ in 0..<200 where counter.open.withLockedValue({ $0 }) > 1 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(counter.open.withLockedValue { $0 } == 1)
        #expect(counter.accepted.withLockedValue { $0 } == 4)
        try await f.stop()
    }
}
