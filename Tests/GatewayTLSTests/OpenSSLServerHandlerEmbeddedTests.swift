import GatewayTLS
import NIOCore
import NIOEmbedded
import Testing

/// Records what the TLS handler delivers downstream.
final class DownstreamRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    var reads: [ByteBuffer] = []
    var readCompletes = 0
    var handshakes: [TLSHandshakeCompleted] = []
    var inactive = false

    var receivedBytes: [UInt8] { self.reads.flatMap { Array($0.readableBytesView) } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.reads.append(self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readCompletes += 1
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSHandshakeCompleted {
            self.handshakes.append(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.inactive = true
    }
}

/// The handler driven deterministically through `EmbeddedChannel` by an
/// in-process OpenSSL client: read back-pressure, write batching, writability,
/// close_notify in both directions, garbage.
@Suite struct OpenSSLServerHandlerEmbeddedTests {
    struct Harness {
        let channel: EmbeddedChannel
        let recorder: DownstreamRecorder
        let client: TestTLSClient
        let directory: TLSTestSupport.TemporaryDirectory

        /// Moves ciphertext server → client.
        func serverToClient() throws -> [ByteBuffer] {
            var buffers: [ByteBuffer] = []
            while let buffer = try self.channel.readOutbound(as: ByteBuffer.self) {
                buffers.append(buffer)
                self.client.receive(buffer)
            }
            return buffers
        }

        func clientToServer() throws {
            let output = self.client.takeOutput()
            if output.readableBytes > 0 {
                try self.channel.writeInbound(output)
            }
        }
    }

    private func makeHarness(clientALPN: [String] = ["http/1.1", "h2"]) async throws -> Harness {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let files = try await TLSTestSupport.makeCertificate(in: directory)
        let context = try TLSServerContext(certificatePath: files.certificate, privateKeyPath: files.key)
        let channel = EmbeddedChannel()
        let recorder = DownstreamRecorder()
        try channel.pipeline.syncOperations.addHandler(OpenSSLHandler(context: context))
        try channel.pipeline.syncOperations.addHandler(recorder)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).get()
        return Harness(channel: channel, recorder: recorder, client: try TestTLSClient(alpn: clientALPN), directory: directory)
    }

    private func handshake(_ harness: Harness) throws {
        for _ in 0..<8 {
            let clientDone = try harness.client.handshake()
            try harness.clientToServer()
            _ = try harness.serverToClient()
            if clientDone && !harness.recorder.handshakes.isEmpty { return }
        }
        Issue.record("handshake did not complete")
    }

    @Test func handshakeFiresEventWithServerPreferredALPN() async throws {
        let harness = try await self.makeHarness(clientALPN: ["http/1.1", "h2"])
        try self.handshake(harness)
        #expect(harness.recorder.handshakes == [TLSHandshakeCompleted(negotiatedALPN: "h2")])
        #expect(harness.client.negotiatedALPN == "h2")
    }

    @Test func clientWithoutCommonALPNStillConnects() async throws {
        let harness = try await self.makeHarness(clientALPN: ["spdy/3"])
        try self.handshake(harness)
        #expect(harness.recorder.handshakes == [TLSHandshakeCompleted(negotiatedALPN: nil)])
    }

    @Test func plaintextWaitsForDownstreamRead() async throws {
        let harness = try await self.makeHarness()
        try self.handshake(harness)
        try harness.channel.writeInbound(try harness.client.send(Array("first".utf8)))
        try harness.channel.writeInbound(try harness.client.send(Array("second".utf8)))
        // autoRead is off in EmbeddedChannel and nobody called read().
        #expect(harness.recorder.reads.isEmpty)
        #expect(harness.recorder.readCompletes == 0)

        harness.channel.read()
        #expect(String(decoding: harness.recorder.receivedBytes, as: UTF8.self) == "firstsecond")
        #expect(harness.recorder.readCompletes == 1)

        // A pending read is satisfied as soon as the next record arrives.
        harness.channel.read()
        try harness.channel.writeInbound(try harness.client.send(Array("third".utf8)))
        #expect(String(decoding: harness.recorder.receivedBytes, as: UTF8.self) == "firstsecondthird")
        #expect(harness.recorder.readCompletes == 2)
    }

    @Test func partialRecordIsBufferedUntilComplete() async throws {
        let harness = try await self.makeHarness()
        try self.handshake(harness)
        harness.channel.read()
        var record = try harness.client.send(Array("split across reads".utf8))
        let slice = record.readSlice(length: 7)
        let head = try #require(slice)
        try harness.channel.writeInbound(head)
        #expect(harness.recorder.reads.isEmpty)
        try harness.channel.writeInbound(record)
        #expect(String(decoding: harness.recorder.receivedBytes, as: UTF8.self) == "split across reads")
    }

    @Test func writesBeforeFlushAreBatchedIntoOneBuffer() async throws {
        let harness = try await self.makeHarness()
        try self.handshake(harness)
        let promises = (0..<3).map { _ in harness.channel.eventLoop.makePromise(of: Void.self) }
        for (index, promise) in promises.enumerated() {
            harness.channel.write(ByteBuffer(string: "part\(index);"), promise: promise)
        }
        #expect(try harness.channel.readOutbound(as: ByteBuffer.self) == nil, "nothing may leave before flush")
        harness.channel.flush()
        let buffers = try harness.serverToClient()
        #expect(buffers.count == 1)
        #expect(String(decoding: try harness.client.readPlaintext(), as: UTF8.self) == "part0;part1;part2;")
        for promise in promises {
            try await promise.futureResult.get()
        }
    }

    @Test func writesBeforeHandshakeAreSentAfterIt() async throws {
        let harness = try await self.makeHarness()
        let promise = harness.channel.eventLoop.makePromise(of: Void.self)
        harness.channel.writeAndFlush(ByteBuffer(string: "early"), promise: promise)
        try self.handshake(harness)
        _ = try harness.serverToClient()
        #expect(String(decoding: try harness.client.readPlaintext(), as: UTF8.self) == "early")
        try await promise.futureResult.get()
    }

    @Test func largeWritePausesWhileChannelIsNotWritable() async throws {
        let harness = try await self.makeHarness()
        try self.handshake(harness)
        let payload = TLSTestSupport.payload(count: 2 * 1024 * 1024)
        let promise = harness.channel.eventLoop.makePromise(of: Void.self)
        let completed = Box(false)
        promise.futureResult.whenComplete { _ in completed.value = true }

        harness.channel.isWritable = false
        harness.channel.writeAndFlush(ByteBuffer(bytes: payload), promise: promise)
        #expect(try harness.channel.readOutbound(as: ByteBuffer.self) == nil, "must not encrypt into an unwritable channel")
        #expect(!completed.value)

        harness.channel.isWritable = true
        harness.channel.pipeline.fireChannelWritabilityChanged()
        let buffers = try harness.serverToClient()
        #expect(buffers.count > 1, "a 2 MiB write is emitted in bounded pieces")
        #expect(buffers.allSatisfy { $0.readableBytes <= 400 * 1024 })
        #expect(completed.value)
        let received = try harness.client.readPlaintext()
        #expect(received.count == payload.count)
        #expect(received == payload)
    }

    @Test func closeSendsCloseNotify() async throws {
        let harness = try await self.makeHarness()
        try self.handshake(harness)
        try await harness.channel.close().get()
        _ = try harness.serverToClient()
        _ = try harness.client.readPlaintext()
        #expect(harness.client.peerClosed)
        #expect(!harness.channel.isActive)
    }

    @Test func peerCloseNotifyClosesAfterDeliveringData() async throws {
        let harness = try await self.makeHarness()
        try self.handshake(harness)
        try harness.channel.writeInbound(try harness.client.send(Array("last words".utf8)))
        try harness.channel.writeInbound(harness.client.closeNotify())
        #expect(String(decoding: harness.recorder.receivedBytes, as: UTF8.self) == "last words")
        #expect(!harness.channel.isActive)
        _ = try harness.serverToClient()
        _ = try harness.client.readPlaintext()
        #expect(harness.client.peerClosed, "server answers with its own close_notify")
    }

    /// OpenSSL answers every KeyUpdate that asks for one: a peer sending
    /// them without reading would pile the answers up. A few are answered
    /// and the connection serves on; a flood is closed once its answers
    /// pass the allowance (16 KiB, ~600 answers), long before 3,000.
    @Test func aKeyUpdateFloodIsClosedAndAFewAreAnswered() async throws {
        let harness = try await self.makeHarness()
        try self.handshake(harness)
        for _ in 0..<10 { try harness.channel.writeInbound(try harness.client.keyUpdate()) }
        try harness.channel.writeInbound(try harness.client.send(Array("still here".utf8)))
        harness.channel.read()
        #expect(String(decoding: harness.recorder.receivedBytes, as: UTF8.self) == "still here")
        #expect(harness.channel.isActive)
        var sent = 10
        while harness.channel.isActive, sent < 3000 {
            try harness.channel.writeInbound(try harness.client.keyUpdate())
            sent += 1
        }
        #expect(!harness.channel.isActive, "open after \(sent) KeyUpdates")
        #expect(sent > 500, "closed after \(sent) KeyUpdates")
    }

    @Test func garbageClosesAndFailsPendingWrites() async throws {
        let harness = try await self.makeHarness()
        let promise = harness.channel.eventLoop.makePromise(of: Void.self)
        harness.channel.writeAndFlush(ByteBuffer(string: "never sent"), promise: promise)
        try harness.channel.writeInbound(ByteBuffer(bytes: TLSTestSupport.payload(count: 1024, seed: 3)))
        #expect(!harness.channel.isActive)
        #expect(harness.recorder.handshakes.isEmpty)
        await #expect(throws: (any Error).self) { try await promise.futureResult.get() }
    }
}

/// Loop-confined mutable flag for promise callbacks in EmbeddedChannel tests.
final class Box<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
