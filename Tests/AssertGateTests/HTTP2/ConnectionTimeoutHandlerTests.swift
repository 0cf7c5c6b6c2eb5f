import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
@testable import AssertGateCore

/// Counts the quiesce events that reach the front end's place in the pipeline.
final class QuiesceRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var quiesced = 0
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent { quiesced += 1 }
        context.fireUserInboundEventTriggered(event)
    }
}

@Suite struct ConnectionTimeoutHandlerTests {
    private func channel(headerTimeout: TimeAmount = .seconds(30)) throws
        -> (EmbeddedChannel, EmbeddedEventLoop, ConnectionTimeoutHandler)
    {
        let loop = EmbeddedEventLoop()
        let handler = ConnectionTimeoutHandler(
            handshakeTimeout: .seconds(2), idleTimeout: .seconds(10), headerTimeout: headerTimeout)
        let ch = EmbeddedChannel(handler: handler, loop: loop)
        try ch.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (ch, loop, handler)
    }

    private func establish(_ ch: EmbeddedChannel, _ handler: ConnectionTimeoutHandler) throws {
        handler.markEstablished()
    }

    @Test func notEstablishedInTimeIsClosedEvenIfBytesArrive() throws {
        let (ch, loop, _) = try channel()
        loop.advanceTime(by: .milliseconds(1500))
        try ch.writeInbound(ByteBuffer(string: "PRI * HT"))
        #expect(ch.isActive)
        loop.advanceTime(by: .milliseconds(500))
        #expect(!ch.isActive)
        // What was read still went through.
        #expect(try ch.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "PRI * HT"))
    }

    @Test func aTrickledRequestHeadIsCutAtTheHeaderTimeout() throws {
        let (ch, loop, handler) = try channel(headerTimeout: .seconds(3))
        try establish(ch, handler)
        handler.awaitRequestHead()
        loop.advanceTime(by: .seconds(5))  // waiting for the first byte: only the idle clock runs
        #expect(ch.isActive)
        // A byte a second: the idle clock never expires, the header clock does.
        for _ in 0..<2 {
            try ch.writeInbound(ByteBuffer(string: "G"))
            loop.advanceTime(by: .seconds(1))
            #expect(ch.isActive)
        }
        try ch.writeInbound(ByteBuffer(string: "E"))
        loop.advanceTime(by: .seconds(1))
        #expect(!ch.isActive)
    }

    @Test func aCompleteHeadStopsTheHeaderClock() throws {
        let (ch, loop, handler) = try channel(headerTimeout: .seconds(3))
        try establish(ch, handler)
        handler.awaitRequestHead()
        try ch.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\n"))
        loop.advanceTime(by: .seconds(2))
        handler.requestHeadReceived()
        // A slow body or a slow upstream is the idle timeout's business.
        for _ in 0..<4 {
            try ch.writeInbound(ByteBuffer(string: "b"))
            loop.advanceTime(by: .seconds(2))
        }
        #expect(ch.isActive)
    }

    @Test func anHTTP2HeaderBlockMustCompleteWithinTheHeaderTimeout() throws {
        let (ch, loop, handler) = try channel(headerTimeout: .seconds(3))
        try establish(ch, handler)
        // HTTP/2: the clock starts when a HEADERS frame begins, not at a byte.
        try ch.writeInbound(ByteBuffer(string: "frames"))
        loop.advanceTime(by: .seconds(5))
        #expect(ch.isActive)
        handler.requestHeadStarted()
        for _ in 0..<2 {
            try ch.writeInbound(ByteBuffer(string: "c"))  // a CONTINUATION a second
            loop.advanceTime(by: .seconds(1))
            #expect(ch.isActive)
        }
        handler.requestHeadStarted()  // a later call does not restart the clock
        loop.advanceTime(by: .seconds(1))
        #expect(!ch.isActive)
    }

    @Test func aCompletedHTTP2HeaderBlockLeavesOnlyTheIdleClock() throws {
        let (ch, loop, handler) = try channel(headerTimeout: .seconds(3))
        try establish(ch, handler)
        handler.requestHeadStarted()
        loop.advanceTime(by: .seconds(2))
        handler.requestHeadReceived()
        for _ in 0..<4 {
            try ch.writeInbound(ByteBuffer(string: "d"))
            loop.advanceTime(by: .seconds(2))
            #expect(ch.isActive)
        }
        loop.advanceTime(by: .seconds(10))
        #expect(!ch.isActive)
    }

    @Test func establishedConnectionsCloseOnlyAfterIdleTimeout() throws {
        let (ch, loop, handler) = try channel()
        loop.advanceTime(by: .seconds(1))
        try establish(ch, handler)
        loop.advanceTime(by: .seconds(5))  // past the handshake timeout
        #expect(ch.isActive)
        try ch.writeInbound(ByteBuffer(string: "x"))  // read: activity at t = 6
        loop.advanceTime(by: .seconds(9))
        #expect(ch.isActive)
        try ch.writeOutbound(ByteBuffer(string: "y"))  // write: activity at t = 15
        loop.advanceTime(by: .seconds(9))
        #expect(ch.isActive)
        let front = QuiesceRecorder()
        try ch.pipeline.syncOperations.addHandler(front)
        loop.advanceTime(by: .seconds(1))
        // Idle: the front end is asked to close as a shutdown would (GOAWAY,
        // close_notify); one that does not is closed after the grace.
        #expect(front.quiesced == 1)
        #expect(ch.isActive)
        loop.advanceTime(by: ConnectionTimeoutHandler.idleCloseGrace)
        #expect(!ch.isActive)
        #expect(try ch.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "y"))
    }

    /// NIO's HTTP/1.1 pipeline handler takes one quiesce: a shutdown's
    /// and the idle close's never both reach the front end.
    @Test func theFrontEndIsAskedToQuiesceOnce() throws {
        let (ch, loop, handler) = try channel()
        try establish(ch, handler)
        let front = QuiesceRecorder()
        try ch.pipeline.syncOperations.addHandler(front)
        ch.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())  // a shutdown
        #expect(front.quiesced == 1)
        loop.advanceTime(by: .seconds(10))  // then idle
        #expect(front.quiesced == 1)
        loop.advanceTime(by: ConnectionTimeoutHandler.idleCloseGrace)
        #expect(!ch.isActive)
    }

    /// ALPN chose HTTP/1.1 before any request byte: the first request head
    /// establishes the connection even when its bytes came in the read
    /// that ended the handshake (seen here as no later read at all).
    @Test func aFirstHeadEstablishesAConnectionWaitingForItsFirstByte() throws {
        let (ch, loop, handler) = try channel()
        handler.establishAtFirstByte()
        handler.requestHeadReceived()
        loop.advanceTime(by: .seconds(5))  // past the handshake timeout (2 s)
        #expect(ch.isActive)
        loop.advanceTime(by: .seconds(5) + ConnectionTimeoutHandler.idleCloseGrace)  // idle 10 s
        #expect(!ch.isActive)
    }

    /// A reload changes the listener's idle timeout: a connection opened
    /// before it follows the new value from the timer's next firing on.
    @Test func theIdleTimeoutFollowsAReloadOnOpenConnections() throws {
        let loop = EmbeddedEventLoop()
        let live = NIOLockedValueBox((idle: TimeAmount.seconds(8), header: TimeAmount.seconds(30)))
        let handler = ConnectionTimeoutHandler(
            handshakeTimeout: .seconds(2), idleTimeout: .seconds(8), headerTimeout: .seconds(30),
            current: { live.withLockedValue { $0 } })
        let ch = EmbeddedChannel(handler: handler, loop: loop)
        try ch.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        handler.markEstablished()
        loop.advanceTime(by: .seconds(1))
        live.withLockedValue { $0.idle = .seconds(30) }  // the reload
        loop.advanceTime(by: .seconds(10))
        #expect(ch.isActive, "closed at the idle timeout of before the reload")
        loop.advanceTime(by: .seconds(19) + ConnectionTimeoutHandler.idleCloseGrace)
        #expect(!ch.isActive)

        // Shortened: the connection closes at the new value once the timer fires.
        let shorter = NIOLockedValueBox((idle: TimeAmount.seconds(30), header: TimeAmount.seconds(30)))
        let h2 = ConnectionTimeoutHandler(
            handshakeTimeout: .seconds(2), idleTimeout: .seconds(30), current: { shorter.withLockedValue { $0 } })
        let ch2 = EmbeddedChannel(handler: h2, loop: loop)
        try ch2.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        shorter.withLockedValue { $0.idle = .seconds(5) }
        h2.markEstablished()
        loop.advanceTime(by: .seconds(5) + ConnectionTimeoutHandler.idleCloseGrace)
        #expect(!ch2.isActive)
    }
}
