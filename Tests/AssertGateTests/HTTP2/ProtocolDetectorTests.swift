import Logging
import NIOCore
import NIOEmbedded
import Testing
import Verifier

@testable import AssertGateCore

final class RecordingObserver: RequestObserver {
    var summaries: [RequestSummary] = []
    var timeouts: [RequestTimeoutKind] = []
    func requestFinished(_ summary: RequestSummary) { summaries.append(summary) }
    func timedOut(_ kind: RequestTimeoutKind) { timeouts.append(kind) }
}

/// Notes how many response bytes had already left when a request was reported.
final class OutboundAtReportObserver: RequestObserver {
    let channel: EmbeddedChannel
    var bytesOutAtReport: [Int] = []
    var drained = ByteBuffer()
    init(channel: EmbeddedChannel) { self.channel = channel }
    func requestFinished(_ summary: RequestSummary) {
        var n = 0
        while var b = try? channel.readOutbound(as: ByteBuffer.self) {
            n += b.readableBytes
            drained.writeBuffer(&b)
        }
        bytesOutAtReport.append(n)
    }
}

@Suite struct ProtocolDetectorTests {
    private func setup(_ mode: ProtocolDetector.Mode) throws -> (EmbeddedChannel, Worker, RecordingObserver) {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: 5000)).wait()
        let config = GatewayConfig(
            listeners: [], apps: [], upstreams: [:],
            routes: [RouteConfig(match: RouteMatch(kind: .prefix("/api/")), upstream: "u", mode: .passthrough)])
        let worker = Worker(
            eventLoop: channel.embeddedEventLoop, snapshot: GatewaySnapshot(config: config), hooks: GatewayHooks(),
            logger: Logger(label: "test"))
        let observer = RecordingObserver()
        worker.observer = observer
        try channel.pipeline.syncOperations.addHandler(ProtocolDetector(worker: worker, mode: mode))
        return (channel, worker, observer)
    }

    private func output(_ channel: EmbeddedChannel) throws -> String {
        channel.embeddedEventLoop.run()
        var all = ByteBuffer()
        while var b = try channel.readOutbound(as: ByteBuffer.self) { all.writeBuffer(&b) }
        return String(decoding: all.readableBytesView, as: UTF8.self)
    }

    @Test func http1BytesGoToTheHTTP1Front() throws {
        let (channel, _, observer) = try setup(.detect)
        // Split in two writes: the first is a prefix of neither the preface nor a full request line.
        try channel.writeInbound(ByteBuffer(string: "GE"))
        try channel.writeInbound(ByteBuffer(string: "T /nope HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc\r\n\r\n"))
        let out = try output(channel)
        #expect(out.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        #expect(out.contains("\"reason\":\"no-route\""))
        #expect(out.lowercased().contains("x-request-id: abc"))
        #expect(observer.summaries.first?.status == 404)
        #expect(observer.summaries.first?.reason == .noRoute)
        #expect(observer.summaries.first?.requestId == "abc")
    }

    /// An HTTP/1.1 answer leaves at once; the request must be counted and
    /// logged before, so a client holding its answer finds it in `/metrics`.
    @Test func http1RequestsAreReportedBeforeTheirAnswerLeaves() throws {
        let (channel, worker, _) = try setup(.detect)
        let observer = OutboundAtReportObserver(channel: channel)
        worker.observer = observer
        try channel.writeInbound(ByteBuffer(string: "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"))
        var out = observer.drained
        out.writeString(try output(channel))
        #expect(String(decoding: out.readableBytesView, as: UTF8.self).hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        #expect(observer.bytesOutAtReport == [0])
    }

    @Test func prefaceInPiecesGoesToHTTP2() throws {
        let (channel, _, _) = try setup(.detect)
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        try channel.writeInbound(ByteBuffer(bytes: preface[0..<10]))
        #expect(try output(channel).isEmpty)
        try channel.writeInbound(ByteBuffer(bytes: preface[10...]))
        channel.embeddedEventLoop.run()
        let first = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(first.getInteger(at: first.readerIndex + 3, as: UInt8.self) == 4)  // a SETTINGS frame
    }

    @Test func waitsForALPNBeforeChoosing() throws {
        let (channel, _, _) = try setup(.awaitNegotiation)
        try channel.writeInbound(ByteBuffer(string: "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(try output(channel).isEmpty)
        channel.pipeline.fireUserInboundEventTriggered(ProtocolDetector.Negotiated(alpn: "http/1.1"))
        #expect(try output(channel).hasPrefix("HTTP/1.1 404"))
    }

    @Test func oversizedHTTP1HeaderBlockGets431() throws {
        let (channel, worker, _) = try setup(.detect)
        worker.snapshot = GatewaySnapshot(config: {
            var c = worker.snapshot.config
            c.limits.maxHeaderListBytes = 1024
            return c
        }())
        let big = String(repeating: "z", count: 4096)
        try channel.writeInbound(ByteBuffer(string: "GET /api/x HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n"))
        let out = try output(channel)
        #expect(out.hasPrefix("HTTP/1.1 431"))
        #expect(out.contains("\"reason\":\"headers-too-large\""))
        #expect(out.lowercased().contains("connection: close"))
    }
}
