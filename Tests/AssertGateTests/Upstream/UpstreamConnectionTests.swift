import Logging
import NIOCore
import NIOHTTP1
import NIOEmbedded
import Testing

@testable import AssertGateCore

/// What an exchange told its delegate.
final class ExchangeRecorder: UpstreamExchangeDelegate {
    var status: Int?
    var body = ""
    var ended = false
    var failure: UpstreamError?
    var trailers: HTTPHeaders?
    func upstreamLeased(_ connection: any UpstreamExchange) {}
    func upstreamLeaseFailed(_ error: UpstreamError) { failure = error }
    func upstreamResponseHead(_ head: UpstreamResponseHead) { status = head.status }
    func upstreamResponseBody(_ buffer: ByteBuffer) { body += String(buffer: buffer) }
    func upstreamResponseTrailers(_ fields: HTTPHeaders) { trailers = fields }
    func upstreamResponseEnd() { ended = true }
    func upstreamFailed(_ error: UpstreamError) { failure = error }
}

/// One upstream connection on an `EmbeddedChannel`: request bytes out, response
/// bytes in, keep-alive and failure handling seen from the delegate and the pool.
@Suite struct UpstreamConnectionTests {
    final class Fixture {
        let channel = EmbeddedChannel()
        let pool: UpstreamPool
        let endpoint: EndpointPool
        let connection: UpstreamConnection
        let recorder = ExchangeRecorder()

        init(responseTimeout: TimeAmount = .seconds(1)) throws {
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
            pool = UpstreamPool(eventLoop: channel.embeddedEventLoop, logger: Logger(label: "test"))
            pool.startSweeping()
            endpoint = pool.endpointPool(upstream: "u", UpstreamEndpoint(host: "127.0.0.1", port: 8080))
            let handler = try UpstreamClientHandler.install(on: channel.pipeline.syncOperations)
            connection = UpstreamConnection(channel: channel, endpoint: endpoint, handler: handler)
            connection.begin(delegate: recorder, responseTimeout: responseTimeout, idleTimeout: .seconds(60))
        }

        func head(_ text: String, chunked: Bool = false) -> UpstreamRequestHead {
            UpstreamRequestHead(bytes: ByteBuffer(string: text), isHead: false, chunked: chunked)
        }

        func sent() throws -> String {
            var out = ""
            while let b = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: b) }
            return out
        }

        func respond(_ text: String) throws {
            try channel.writeInbound(ByteBuffer(string: text))
            channel.embeddedEventLoop.run()
        }
    }

    static let get = "GET /x HTTP/1.1\r\nhost: u\r\n\r\n"

    @Test func anExchangeEndsInTheIdlePool() throws {
        let f = try Fixture()
        f.connection.sendHead(.http1(f.head(Self.get)), end: true)
        #expect(try f.sent() == Self.get)
        try f.respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(f.recorder.status == 200)
        #expect(f.recorder.body == "ok")
        #expect(f.recorder.ended)
        #expect(f.recorder.failure == nil)
        #expect(!f.connection.isClosed)
        #expect(f.endpoint.idleCount == 1)
        #expect(f.connection.exchanges == 1)
    }

    @Test func connectionCloseIsNotKeptAlive() throws {
        let f = try Fixture()
        f.connection.sendHead(.http1(f.head(Self.get)), end: true)
        try f.respond("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        #expect(f.recorder.ended)
        #expect(f.connection.isClosed)
        #expect(f.endpoint.idleCount == 0)
    }

    @Test func anAnswerBeforeTheBodyWasSentClosesTheConnection() throws {
        let f = try Fixture()
        f.connection.sendHead(.http1(f.head("POST /x HTTP/1.1\r\nhost: u\r\ncontent-length: 5\r\n\r\n")), end: false)
        try f.respond("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
        #expect(f.recorder.status == 413)
        #expect(f.recorder.ended)
        // The upstream may still be reading a body it will never get: never reused.
        #expect(f.connection.isClosed)
    }

    @Test func chunkedBodiesAreFramedHere() throws {
        let f = try Fixture()
        f.connection.sendHead(.http1(f.head("POST /x HTTP/1.1\r\nhost: u\r\ntransfer-encoding: chunked\r\n\r\n", chunked: true)), end: false)
        f.connection.sendBody(ByteBuffer(string: "abc"), promise: nil)
        f.connection.sendEnd()
        let wire = try f.sent()
        #expect(wire.hasSuffix("\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
    }

    @Test func aCloseMidResponseIsConnectionLost() throws {
        let f = try Fixture()
        f.connection.sendHead(.http1(f.head(Self.get)), end: true)
        try f.respond("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        f.channel.pipeline.fireChannelInactive()
        f.channel.embeddedEventLoop.run()
        #expect(f.recorder.failure == .connectionLost)
        #expect(f.recorder.body == "abc")
        #expect(!f.recorder.ended)
    }

    @Test func bytesThatAreNotAResponseAreInvalid() throws {
        let f = try Fixture()
        f.connection.sendHead(.http1(f.head(Self.get)), end: true)
        try f.respond("SMTP ready\r\n\r\n")
        f.channel.embeddedEventLoop.run()
        #expect(f.recorder.failure == .invalidResponse)
        #expect(f.connection.isClosed)
    }

    @Test func noHeadWithinTheResponseTimeoutFails() throws {
        let f = try Fixture(responseTimeout: .seconds(1))
        f.connection.sendHead(.http1(f.head(Self.get)), end: true)
        // The pool's sweep runs every 100 ms on the loop's clock.
        f.channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
        #expect(f.recorder.failure == nil)
        f.channel.embeddedEventLoop.advanceTime(by: .milliseconds(300))
        #expect(f.recorder.failure == .responseTimeout)
        #expect(f.connection.isClosed)
    }

    @Test func aResponseThatGoesQuietIsCutAfterTheTimeout() throws {
        let f = try Fixture(responseTimeout: .seconds(1))
        f.connection.sendHead(.http1(f.head(Self.get)), end: true)
        try f.respond("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        f.channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        #expect(f.recorder.failure == nil)
        f.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1000))
        #expect(f.recorder.failure == .responseTimeout)
    }
}
