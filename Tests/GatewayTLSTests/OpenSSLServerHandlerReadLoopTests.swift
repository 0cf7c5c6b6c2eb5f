import GatewayTLS
import NIOCore
import NIOEmbedded
import Testing

/// Regression tests for stalls: the handler behind a `SimulatedSocket`, so
/// a read() swallowed without re-arming the socket, or flushed writes
/// dropped by a close, fail deterministically instead of as a 30 s curl
/// timeout under load.
@Suite struct OpenSSLServerHandlerReadLoopTests {
    struct Harness {
        let channel: EmbeddedChannel
        let socket: SimulatedSocket
        let recorder: DownstreamRecorder
        let client: TestTLSClient
        let directory: TLSTestSupport.TemporaryDirectory

        func serverToClient() throws {
            while let buffer = try self.channel.readOutbound(as: ByteBuffer.self) {
                self.client.receive(buffer)
            }
        }

        /// Runs the handshake up to the client's Finished and returns that
        /// flight unsent, so a test can choose what travels with it.
        func handshakeUntilClientFinished() throws -> ByteBuffer {
            for _ in 0..<8 {
                let done = try self.client.handshake()
                let output = self.client.takeOutput()
                if done { return output }
                self.socket.arrive(output)
                try self.serverToClient()
            }
            throw TestTLSClient.Failure(description: "client handshake did not complete")
        }

        func handshake() throws {
            self.socket.arrive(try self.handshakeUntilClientFinished())
            try self.serverToClient()
        }

        /// Many TLS records (at most 16 KiB each) in one buffer.
        func records(_ payload: [UInt8]) throws -> ByteBuffer {
            var buffer = ByteBuffer()
            var offset = 0
            while offset < payload.count {
                let end = min(offset + 16 * 1024, payload.count)
                var record = try self.client.send(Array(payload[offset..<end]))
                buffer.writeBuffer(&record)
                offset = end
            }
            return buffer
        }
    }

    private func makeHarness(autoRead: Bool) async throws -> Harness {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let files = try await TLSTestSupport.makeCertificate(in: directory)
        let context = try TLSServerContext(certificatePath: files.certificate, privateKeyPath: files.key)
        let channel = EmbeddedChannel()
        let recorder = DownstreamRecorder()
        let socket = SimulatedSocket(autoRead: autoRead)
        try channel.pipeline.syncOperations.addHandler(OpenSSLHandler(context: context))
        try channel.pipeline.syncOperations.addHandler(recorder)
        try await socket.install(on: channel)
        return Harness(
            channel: channel, socket: socket, recorder: recorder, client: try TestTLSClient(alpn: ["http/1.1"]),
            directory: directory)
    }

    /// The field failure: curl's Finished and the first request bytes came
    /// in one socket read. The plaintext was delivered from the channel's
    /// own autoRead read(), which the handler swallowed, so no socket read
    /// was ever issued again and the upload hung.
    @Test func autoReadKeepsReadingAfterRecordsArriveWithClientFinished() async throws {
        let harness = try await self.makeHarness(autoRead: true)
        var flight = try harness.handshakeUntilClientFinished()
        let first = TLSTestSupport.payload(count: 256 * 1024, seed: 1)
        var records = try harness.records(first)
        flight.writeBuffer(&records)
        harness.socket.arrive(flight)
        #expect(harness.recorder.handshakes.count == 1)
        expectSameBytes(harness.recorder.receivedBytes, first)
        #expect(harness.socket.readPending, "with autoRead on a socket read must stay outstanding")

        let second = TLSTestSupport.payload(count: 64 * 1024, seed: 2)
        harness.socket.arrive(try harness.records(second))
        #expect(harness.socket.queuedBytes == 0, "bytes left unread in the socket")
        expectSameBytes(harness.recorder.receivedBytes, first + second)
    }

    /// Steady state: a large number of records in each inbound buffer are
    /// all delivered without waiting for another socket read.
    @Test func autoReadDeliversEveryRecordOfLargeBuffers() async throws {
        let harness = try await self.makeHarness(autoRead: true)
        try harness.handshake()
        var expected: [UInt8] = []
        for round in 0..<8 {
            let payload = TLSTestSupport.payload(count: 1024 * 1024 + round * 777, seed: UInt64(round + 10))
            expected += payload
            harness.socket.arrive(try harness.records(payload))
            #expect(harness.recorder.receivedBytes.count == expected.count, "round \(round)")
            #expect(harness.socket.readPending, "round \(round)")
        }
        expectSameBytes(harness.recorder.receivedBytes, expected)
    }

    /// autoRead off: nothing is delivered unasked, each read() delivers what
    /// is buffered, and a read() satisfied from the buffer still lets the
    /// stream continue.
    @Test func manualReadsDeliverOnlyWhenAskedAndNeverStall() async throws {
        let harness = try await self.makeHarness(autoRead: false)
        harness.channel.read()  // the application's first read
        try harness.handshake()
        // That read is still outstanding: the first records answer it.
        let first = TLSTestSupport.payload(count: 100 * 1024, seed: 19)
        harness.socket.arrive(try harness.records(first))
        expectSameBytes(harness.recorder.receivedBytes, first)
        var expected = first
        for round in 0..<4 {
            let payload = TLSTestSupport.payload(count: 200 * 1024, seed: UInt64(round + 20))
            expected += payload
            harness.socket.arrive(try harness.records(payload))
        }
        expectSameBytes(harness.recorder.receivedBytes, first, "delivered without a read()")
        var reads = 0
        while harness.recorder.receivedBytes.count < expected.count && reads < 100 {
            let before = harness.recorder.receivedBytes.count
            harness.channel.read()
            harness.socket.pump()
            reads += 1
            #expect(harness.recorder.receivedBytes.count > before, "read() \(reads) delivered nothing")
        }
        expectSameBytes(harness.recorder.receivedBytes, expected)
        #expect(harness.socket.queuedBytes == 0)
    }

    /// Both directions busy: a large write paused by back-pressure while
    /// records keep arriving; reads continue and the write finishes once
    /// the socket is writable again.
    @Test func readsContinueWhileLargeWriteIsPaused() async throws {
        let harness = try await self.makeHarness(autoRead: true)
        try harness.handshake()
        let outbound = TLSTestSupport.payload(count: 2 * 1024 * 1024, seed: 30)
        let written = Box(false)
        let promise = harness.channel.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenSuccess { written.value = true }
        harness.socket.unwritableAfterBytes = 300 * 1024
        harness.channel.writeAndFlush(ByteBuffer(bytes: outbound), promise: promise)
        #expect(!harness.channel.isWritable)
        #expect(!written.value)

        let inbound = TLSTestSupport.payload(count: 512 * 1024, seed: 31)
        harness.socket.arrive(try harness.records(inbound))
        expectSameBytes(harness.recorder.receivedBytes, inbound)
        #expect(harness.socket.readPending)

        harness.socket.becomeWritable()
        #expect(written.value)
        try harness.serverToClient()
        try expectSameBytes(harness.client.readPlaintext(), outbound)
    }

    /// Closing from a write promise that completes inside the handler's own
    /// flush, while a later flushed write is paused by back-pressure: the
    /// later write must still go out before close_notify, not be failed.
    @Test func closeFromWritePromiseSendsRemainingFlushedWrites() async throws {
        let harness = try await self.makeHarness(autoRead: true)
        try harness.handshake()
        let head = Array("HTTP/1.1 200 OK\r\n\r\n".utf8)
        let body = TLSTestSupport.payload(count: 1024 * 1024, seed: 40)
        let channel = harness.channel
        let headPromise = channel.eventLoop.makePromise(of: Void.self)
        headPromise.futureResult.whenSuccess { channel.close(promise: nil) }
        let bodyResult = Box<Result<Void, any Error>?>(nil)
        let bodyPromise = channel.eventLoop.makePromise(of: Void.self)
        bodyPromise.futureResult.whenComplete { bodyResult.value = $0 }

        harness.socket.unwritableAfterBytes = 300 * 1024
        channel.write(ByteBuffer(bytes: head), promise: headPromise)
        channel.writeAndFlush(ByteBuffer(bytes: body), promise: bodyPromise)
        try harness.serverToClient()

        let outcome = try #require(bodyResult.value, "body write neither sent nor failed")
        #expect(throws: Never.self) { try outcome.get() }
        try expectSameBytes(harness.client.readPlaintext(), head + body)
        #expect(harness.client.peerClosed, "close_notify after the body")
        #expect(!channel.isActive)
    }

    /// HTTP/1.1 lingering: a half close sends close_notify, and the linger
    /// timer's full close later must reach the socket, not wait on the first.
    @Test func aFullCloseAfterAHalfCloseClosesTheSocket() async throws {
        let harness = try await self.makeHarness(autoRead: true)
        try harness.handshake()
        harness.channel.close(mode: .output, promise: nil)
        harness.channel.embeddedEventLoop.run()
        try harness.serverToClient()
        #expect(try harness.client.readPlaintext().isEmpty)
        #expect(harness.client.peerClosed, "close_notify on the half close")
        #expect(harness.socket.closes == [.output])
        harness.channel.close(mode: .all, promise: nil)
        harness.channel.embeddedEventLoop.run()
        #expect(harness.socket.closes == [.output, .all])
        #expect(!harness.channel.isActive)
    }
}

/// Byte equality that reports only the lengths when it fails (a failed
/// `#expect(a == b)` on megabyte arrays renders every byte).
private func expectSameBytes(
    _ actual: [UInt8], _ expected: [UInt8], _ comment: Comment? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    if actual == expected { return }
    Issue.record(
        "received \(actual.count) bytes, expected \(expected.count) (contents differ or truncated) \(comment.map { "\($0)" } ?? "")",
        sourceLocation: sourceLocation)
}
