import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import AssertGateCore

/// The HTTP/1.1 front end on an `EmbeddedChannel`: raw request bytes in,
/// raw response bytes out, NIO's codec and pipelining handler as `serve`
/// installs them. Upstream exchanges are the integration suite's.
@Suite struct HTTP1ServerHandlerTests {
    final class Fixture {
        let channel = EmbeddedChannel()
        let worker: Worker
        let local: EchoLengthHandler
        let observer = RecordingObserver()

        init(configure: (inout GatewayConfig) -> Void = { _ in }) throws {
            let loop = channel.embeddedEventLoop
            worker = Worker.forTests(on: loop, configure: configure)
            let config = worker.snapshot.config
            local = EchoLengthHandler(eventLoop: loop)
            worker.localHandlers = [local]
            worker.observer = observer
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderListSize = config.limits.maxHeaderListBytes
            limits.maxHeaderFieldSize = config.limits.maxHeaderListBytes
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 4000)).wait()
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(HTTP1ServerHandler(worker: worker, scheme: "http"))
            try sync.configureHTTPServerPipeline(
                position: .first, withPipeliningAssistance: true, withServerUpgrade: nil, withErrorHandling: false,
                withOutboundHeaderValidation: true, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: limits)
        }

        /// Sends `text` and returns everything the gateway wrote back. An
        /// embedded channel does not read by itself: `read()` is issued as
        /// autoRead would, so requests held back by pipelining come through.
        func exchange(_ text: String) throws -> String {
            try channel.writeInbound(ByteBuffer(string: text))
            var out = ""
            for _ in 0..<8 {
                channel.embeddedEventLoop.run()
                var got = false
                while let b = try channel.readOutbound(as: ByteBuffer.self) {
                    out += String(buffer: b)
                    got = true
                }
                if !got { break }
                channel.read()
            }
            return out
        }
    }

    /// The status of every response on the wire, in order (a body may run
    /// straight into the next status line).
    private func statuses(_ wire: String) -> [String] {
        wire.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
    }

    @Test func localAnswerKeepsTheConnectionForTheNextRequest() throws {
        let f = try Fixture()
        let first = try f.exchange("POST /local/a HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\nabc")
        #expect(statuses(first) == ["200"])
        #expect(first.hasSuffix("len=3"))
        #expect(first.lowercased().contains("content-length: 5\r\n"))
        // The handler's own x-request-id is replaced by the gateway's.
        #expect(!first.contains("spoof"))
        #expect(f.channel.isActive)
        let second = try f.exchange("GET /local/b HTTP/1.1\r\nHost: gw\r\n\r\n")
        #expect(statuses(second) == ["200"])
        #expect(f.local.calls == 2)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let f = try Fixture()
        let wire = try f.exchange(
            "POST /local/a HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\n\r\nx"
                + "POST /local/b HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\n\r\nwxyz")
        #expect(statuses(wire) == ["200", "200"])
        let first = try #require(wire.range(of: "len=1"))
        let second = try #require(wire.range(of: "len=4"))
        #expect(first.lowerBound < second.lowerBound)
    }

    /// Runs the loop and returns what the gateway wrote (after an answer
    /// given outside `exchange`, such as a hanging local handler's release).
    private func drain(_ f: Fixture) throws -> String {
        try f.exchange("")
    }

    /// The next request's head is delivered by NIO's pipelining handler while
    /// the answered one writes its end, before that one has finished: the rest
    /// of the next request's body, sent later, must still reach it.
    @Test func aPipelinedRequestWhoseBodyComesLaterIsStillServed() throws {
        let f = try Fixture()
        // The first answer comes later (a hanging local handler), so the second
        // request waits in the pipelining handler, its body only half sent.
        let nothing = try f.exchange(
            "POST /local/hang HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\n\r\nx"
                + "POST /local/b HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\n\r\nwx")
        #expect(statuses(nothing).isEmpty)
        f.local.release()
        let first = try drain(f)
        #expect(statuses(first) == ["200"])
        #expect(first.hasSuffix("late"))
        let second = try f.exchange("yz")
        #expect(statuses(second) == ["200"])
        #expect(second.hasSuffix("len=4"))
        #expect(f.local.calls == 2)
        let third = try f.exchange("GET /local/c HTTP/1.1\r\nHost: gw\r\n\r\n")
        #expect(statuses(third) == ["200"])
    }

    /// Many pipelined requests the gateway answers itself, waiting behind a
    /// slow one: each is served after the one before has finished, in order,
    /// without the call stack growing with their number.
    @Test func manyPipelinedLocalAnswersBehindASlowOne() throws {
        let f = try Fixture()
        let n = 3000
        let nothing = try f.exchange(
            "GET /local/hang HTTP/1.1\r\nHost: gw\r\n\r\n"
                + String(repeating: "GET /nowhere HTTP/1.1\r\nHost: gw\r\n\r\n", count: n))
        #expect(statuses(nothing).isEmpty)
        f.local.release()
        var wire = ""
        for _ in 0..<20 where statuses(wire).count < n + 1 { wire += try drain(f) }
        let got = statuses(wire)
        #expect(got.count == n + 1)
        #expect(got.first == "200")
        #expect(got.dropFirst().allSatisfy { $0 == "404" })
        #expect(f.channel.isActive)
        #expect(f.observer.summaries.count == n + 1)
    }

    @Test func noRouteIsAProblemAndTheConnectionServesOn() throws {
        let f = try Fixture()
        let wire = try f.exchange("GET /nowhere HTTP/1.1\r\nHost: gw\r\n\r\n")
        #expect(statuses(wire) == ["404"])
        #expect(wire.contains("application/problem+json"))
        #expect(wire.contains("\"reason\":\"no-route\""))
        #expect(f.channel.isActive)
        #expect(f.observer.summaries.last?.reason == .noRoute)
    }

    @Test func headOverTheLimitIs431AndClosed() throws {
        let f = try Fixture { $0.limits.maxHeaderListBytes = 256 }
        let big = String(repeating: "v", count: 400)
        let wire = try f.exchange("GET /local/a HTTP/1.1\r\nHost: gw\r\nX-Big: \(big)\r\n\r\n")
        #expect(statuses(wire) == ["431"])
        #expect(wire.contains("headers-too-large"))
        #expect(wire.lowercased().contains("connection: close"))
        #expect(f.local.calls == 0)
    }

    @Test func bytesThatAreNotHTTPAre400AndClosed() throws {
        let f = try Fixture()
        let wire = try f.exchange("\u{1}\u{2}NOT HTTP\r\n\r\n")
        #expect(statuses(wire) == ["400"])
        #expect(wire.contains("malformed-request"))
        #expect(!f.channel.isActive)
    }

    @Test func underscoreHeadersRefusedWhenConfigured() throws {
        let f = try Fixture { $0.limits.underscoresInHeaders = .reject }
        let wire = try f.exchange("GET /local/a HTTP/1.1\r\nHost: gw\r\nX_AssertGate_User: alice\r\n\r\n")
        #expect(statuses(wire) == ["400"])
        #expect(wire.contains("malformed-request"))
        #expect(f.local.calls == 0)
    }

    @Test func invalidChunkIs400() throws {
        let f = try Fixture()
        let wire = try f.exchange(
            "POST /local/a HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n")
        #expect(statuses(wire) == ["400"])
        #expect(f.local.calls == 0)
    }
}
