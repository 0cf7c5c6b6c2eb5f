import NIOCore
import NIOEmbedded
import Testing

@testable import AssertGateRedis

@Suite(.timeLimit(.minutes(1))) struct RESPCodecTests {
    private func decoderChannel(_ limits: RESPLimits = .default) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(RESPValueDecoder(limits: limits))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
        return channel
    }

    private func feed(_ channel: EmbeddedChannel, _ text: String) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    private func replies(_ channel: EmbeddedChannel) throws -> [RESPValue] {
        var out: [RESPValue] = []
        while let v: RESPValue = try channel.readInbound() { out.append(v) }
        return out
    }

    @Test func decodesEveryReplyKind() throws {
        let ch = try decoderChannel()
        try feed(ch, "+OK\r\n-ERR bad thing\r\n:-42\r\n$3\r\nf\0o\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n*2\r\n*1\r\n:1\r\n$1\r\nx\r\n")
        #expect(
            try replies(ch) == [
                .status("OK"), .error("ERR bad thing"), .integer(-42), .bulk([0x66, 0, 0x6F]), .bulk([]), .null, .null,
                .array([]), .array([.array([.integer(1)]), .bulk([0x78])]),
            ])
        // Empty and null arrays inside arrays close their parent correctly
        // (the reader assembles values from hiredis' parse events).
        try feed(ch, "*3\r\n*0\r\n$-1\r\n*2\r\n*-1\r\n:5\r\n*1\r\n*1\r\n*0\r\n")
        #expect(
            try replies(ch) == [
                .array([.array([]), .null, .array([.null, .integer(5)])]), .array([.array([.array([])])]),
            ])
        #expect(ch.isActive)
    }

    @Test func aReplySplitAcrossReadsIsDeliveredOnceComplete() throws {
        let ch = try decoderChannel()
        let wire = Array("*3\r\n$5\r\nhello\r\n:7\r\n+PONG\r\n".utf8)
        for (i, byte) in wire.enumerated() {
            try ch.writeInbound(ByteBuffer(bytes: [byte]))
            let got = try replies(ch)
            if i == wire.count - 1 {
                #expect(got == [.array([.bulk(Array("hello".utf8)), .integer(7), .status("PONG")])])
            } else {
                #expect(got.isEmpty, "early reply at byte \(i)")
            }
        }
    }

    @Test func bulkLongerThanTheLimitIsRefusedFromItsHeader() throws {
        let ch = try decoderChannel(RESPLimits(maxBulkLength: 1000))
        // Only the header arrives: hiredis would wait for (and buffer) 2^40 bytes.
        #expect {
            try feed(ch, "$1099511627776\r\n")
        } throws: { error in
            guard case RESPDecodingError.bulkTooLong(let n) = error else { return false }
            return n > 1000
        }
        #expect(!ch.isActive)
    }

    @Test func bulkAtTheLimitPasses() throws {
        let ch = try decoderChannel(RESPLimits(maxBulkLength: 4))
        try feed(ch, "$4\r\nabcd\r\n")
        #expect(try replies(ch) == [.bulk(Array("abcd".utf8))])
    }

    @Test func arrayCountOverTheLimitIsRefusedBeforeHiredisAllocates() throws {
        let ch = try decoderChannel(RESPLimits(maxArrayCount: 16))
        #expect(throws: RESPDecodingError.arrayTooLong(17)) { try feed(ch, "*17\r\n") }
        #expect(!ch.isActive)
    }

    /// The defaults take the largest replies the gateway asks for: a claim of
    /// 1000 DeviceCheck updates (3 × 1000 elements in one array) and
    /// `CLUSTER SLOTS` of a cluster resharded into 2,000 slot ranges, each
    /// with a master and two replicas. Smaller defaults refused them and
    /// closed the connection with every command on it.
    @Test func theDefaultsTakeTheGatewaysLargestReplies() throws {
        let ch = try decoderChannel()
        try feed(ch, "*3000\r\n" + String(repeating: "$2\r\nid\r\n", count: 3000))
        let claim = try replies(ch)
        #expect(claim.count == 1)
        if case .array(let items) = claim.first { #expect(items.count == 3000) } else { Issue.record("not an array") }
        let node = "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$40\r\n" + String(repeating: "f", count: 40) + "\r\n"
        var slots = "*2000\r\n"
        for i in 0..<2000 { slots += "*5\r\n:\(i * 8)\r\n:\(i * 8 + 7)\r\n" + node + node + node }
        try feed(ch, slots)
        let topology = try replies(ch)
        if case .array(let ranges) = topology.first { #expect(ranges.count == 2000) } else { Issue.record("not an array") }
        #expect(ch.isActive)
    }

    @Test func nestingDeeperThanTheLimitIsRefused() throws {
        let ch = try decoderChannel(RESPLimits(maxDepth: 3))
        #expect(throws: RESPDecodingError.tooDeep) { try feed(ch, "*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n") }
        let ok = try decoderChannel(RESPLimits(maxDepth: 3))
        try feed(ok, "*1\r\n*1\r\n*1\r\n:1\r\n")
        #expect(try replies(ok) == [.array([.array([.array([.integer(1)])])])])
    }

    @Test func totalElementsAndReplyBytesAreBounded() throws {
        let ch = try decoderChannel(RESPLimits(maxArrayCount: 10, maxTotalElements: 20))
        // 3 × 10 declared elements in one reply.
        #expect(throws: RESPDecodingError.tooManyElements) {
            try feed(ch, "*3\r\n*10\r\n" + String(repeating: ":1\r\n", count: 10) + "*10\r\n")
        }
        let big = try decoderChannel(RESPLimits(maxBulkLength: 100, maxReplyBytes: 150))
        #expect(throws: RESPDecodingError.replyTooLarge) {
            try feed(big, "*2\r\n$100\r\n" + String(repeating: "a", count: 100) + "\r\n$100\r\n" + String(repeating: "a", count: 100))
        }
        // The byte budget is per reply: many small replies in a row are fine.
        let many = try decoderChannel(RESPLimits(maxReplyBytes: 16))
        try feed(many, String(repeating: "+0123456789\r\n", count: 100))
        #expect(try replies(many).count == 100)
    }

    @Test func endlessLinesAndGarbageAreRefused() throws {
        let ch = try decoderChannel(RESPLimits(maxLineLength: 64))
        #expect(throws: RESPDecodingError.lineTooLong) { try feed(ch, "+" + String(repeating: "x", count: 100)) }
        let garbage = try decoderChannel()
        #expect(throws: RESPDecodingError.invalidTypeByte(UInt8(ascii: "H"))) { try feed(garbage, "HTTP/1.1 200 OK\r\n") }
        let negative = try decoderChannel()
        #expect(throws: RESPDecodingError.invalidLength) { try feed(negative, "$-2\r\n") }
        let bad = try decoderChannel()
        #expect(throws: RESPDecodingError.invalidLength) { try feed(bad, "*1x\r\n") }
    }

    @Test func encoderWritesRESPArraysOfBulkStrings() {
        let command = RESPCommand("SET", .bytes([0, 0xFF]), .integer(-12), .integer(0), .string("é"))
        #expect(
            command.bytes
                == ByteBuffer(bytes: Array("*5\r\n$3\r\nSET\r\n$2\r\n".utf8) + [0, 0xFF] + Array("\r\n$3\r\n-12\r\n$1\r\n0\r\n$2\r\né\r\n".utf8)))
        #expect(RESPCommand([]).bytes == ByteBuffer(string: "*0\r\n"))
        #expect(RESPCommand("X", .integer(Int64.min)).bytes == ByteBuffer(string: "*2\r\n$1\r\nX\r\n$20\r\n-9223372036854775808\r\n"))
    }

    @Test func scriptSHA1MatchesRedis() {
        // `redis-cli SCRIPT LOAD "return 1"` answers this digest.
        #expect(RedisScript("return 1").sha1 == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
    }
}

/// The result of a future on an EmbeddedEventLoop without blocking: nil if not complete.
private func outcome(_ f: EventLoopFuture<RESPValue>) -> Result<RESPValue, any Error>? {
    let box = ResultBox()
    f.whenComplete { box.value = $0 }
    return box.value
}

private final class ResultBox: @unchecked Sendable {
    var value: Result<RESPValue, any Error>?
}

private func failure(_ f: EventLoopFuture<RESPValue>) -> RedisError? {
    guard case .failure(let e) = outcome(f) else { return nil }
    return e as? RedisError
}

@Suite(.timeLimit(.minutes(1))) struct RedisCommandHandlerTests {
    private func channel(timeout: TimeAmount = .seconds(1)) throws -> (EmbeddedChannel, EmbeddedEventLoop) {
        let loop = EmbeddedEventLoop()
        let ch = EmbeddedChannel(loop: loop)
        try ch.pipeline.syncOperations.addHandler(RedisCommandHandler(commandTimeout: timeout))
        try ch.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
        return (ch, loop)
    }

    @Test func repliesCompleteCommandsInOrder() throws {
        let (ch, loop) = try channel()
        let a = loop.makePromise(of: RESPValue.self)
        let b = loop.makePromise(of: RESPValue.self)
        ch.write(RedisRequest(command: RESPCommand("GET", "a"), promise: a), promise: nil)
        ch.writeAndFlush(RedisRequest(command: RESPCommand("GET", "b"), promise: b), promise: nil)
        // The flush is consolidated to the end of the loop tick, and the
        // burst leaves as one write.
        #expect(try ch.readOutbound(as: ByteBuffer.self) == nil)
        loop.run()
        let out = try #require(try ch.readOutbound(as: ByteBuffer.self))
        #expect(out == ByteBuffer(string: "*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n"))
        #expect(try ch.readOutbound(as: ByteBuffer.self) == nil)
        try ch.writeInbound(ByteBuffer(string: "$1\r\n1\r\n$1"))
        #expect(try outcome(a.futureResult)?.get() == .bulk([0x31]))
        #expect(outcome(b.futureResult) == nil)
        try ch.writeInbound(ByteBuffer(string: "\r\n2\r\n"))
        #expect(try outcome(b.futureResult)?.get() == .bulk([0x32]))
    }

    @Test func aMissingReplyTimesOutAndClosesTheConnection() throws {
        let (ch, loop) = try channel(timeout: .milliseconds(250))
        let a = loop.makePromise(of: RESPValue.self)
        let b = loop.makePromise(of: RESPValue.self)
        ch.writeAndFlush(RedisRequest(command: RESPCommand("PING"), promise: a), promise: nil)
        loop.advanceTime(by: .milliseconds(100))
        ch.writeAndFlush(RedisRequest(command: RESPCommand("PING"), promise: b), promise: nil)
        loop.advanceTime(by: .milliseconds(149))
        #expect(ch.isActive)
        #expect(outcome(a.futureResult) == nil)
        loop.advanceTime(by: .milliseconds(1))
        #expect(failure(a.futureResult) == .unavailable(.timeout))
        #expect(failure(b.futureResult) == .unavailable(.timeout))
        #expect(!ch.isActive)
    }

    @Test func closingFailsEveryPendingCommand() throws {
        let (ch, loop) = try channel()
        let promises = (0..<3).map { _ in loop.makePromise(of: RESPValue.self) }
        for p in promises { ch.writeAndFlush(RedisRequest(command: RESPCommand("PING"), promise: p), promise: nil) }
        try ch.close().wait()
        for p in promises {
            #expect(failure(p.futureResult) == .unavailable(.connectionLost))
        }
    }

    @Test func anUnsolicitedReplyOrGarbageClosesTheConnection() throws {
        let (quiet, _) = try channel()
        _ = try? quiet.writeInbound(ByteBuffer(string: "+OK\r\n"))
        #expect(!quiet.isActive)

        let (ch, loop) = try channel()
        let p = loop.makePromise(of: RESPValue.self)
        ch.writeAndFlush(RedisRequest(command: RESPCommand("PING"), promise: p), promise: nil)
        _ = try? ch.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\n"))
        guard case .unavailable(.protocolViolation) = failure(p.futureResult) else {
            Issue.record("expected a protocol violation, got \(String(describing: outcome(p.futureResult)))")
            return
        }
        #expect(!ch.isActive)
        // Commands after the close fail at once instead of waiting for a reply.
        let late = loop.makePromise(of: RESPValue.self)
        ch.writeAndFlush(RedisRequest(command: RESPCommand("PING"), promise: late), promise: nil)
        #expect(failure(late.futureResult) != nil)
    }

    @Test func repliesInOneReadCompleteTheirCommandsInOrder() throws {
        let (ch, loop) = try channel()
        let promises = (0..<3).map { _ in loop.makePromise(of: RESPValue.self) }
        for p in promises { ch.write(RedisRequest(command: RESPCommand("INCR", "n"), promise: p), promise: nil) }
        ch.flush()
        loop.run()
        try ch.writeInbound(ByteBuffer(string: ":1\r\n:2\r\n:3\r\n"))
        #expect(try promises.map { try outcome($0.futureResult)?.get() } == [.integer(1), .integer(2), .integer(3)])
        #expect(ch.isActive)
    }

    @Test func anOversizedReplyFailsPendingWithAProtocolViolation() throws {
        let (ch, loop) = try channel()
        let p = loop.makePromise(of: RESPValue.self)
        ch.writeAndFlush(RedisRequest(command: RESPCommand("GET", "k"), promise: p), promise: nil)
        _ = try? ch.writeInbound(ByteBuffer(string: "$99999999999\r\n"))
        guard case .unavailable(.protocolViolation) = failure(p.futureResult) else {
            Issue.record("expected a protocol violation, got \(String(describing: outcome(p.futureResult)))")
            return
        }
        #expect(!ch.isActive)
    }
}
