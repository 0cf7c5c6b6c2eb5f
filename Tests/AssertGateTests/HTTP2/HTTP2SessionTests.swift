import CNGHTTP2
import NIOCore
import NIOHTTP1
import Testing

@testable import AssertGateCore

/// A data source with a queue a test fills: what the session reads, and when it waits.
final class QueuedSource: HTTP2DataSource {
    var queued: [UInt8] = []
    var ended = false
    /// Reported once with the read that takes the queue under this many bytes.
    var lowWater: Int?
    private(set) var reads = 0

    init(_ bytes: [UInt8] = [], ended: Bool = false) {
        queued = bytes
        self.ended = ended
    }

    func readData(into buffer: UnsafeMutableRawBufferPointer) -> HTTP2DataRead {
        reads += 1
        let n = min(buffer.count, queued.count)
        if n == 0, !ended { return .deferred }
        let before = queued.count
        queued.withUnsafeBytes { src in
            if let from = src.baseAddress { buffer.baseAddress?.copyMemory(from: from, byteCount: n) }
        }
        queued.removeFirst(n)
        var drained = false
        if let mark = lowWater, before >= mark, queued.count < mark {
            drained = true
            lowWater = nil
        }
        return .bytes(n, end: ended && queued.isEmpty, drained: drained)
    }
}

/// `HTTP2Session` on bytes alone: no channel, no event loop. The peer is
/// either frames built by hand or `TestH2Client` (a real nghttp2 client).
@Suite struct HTTP2SessionTests {
    static let settings = HTTP2Session.Settings(
        maxConcurrentStreams: 100, maxHeaderListBytes: 16 << 10, streamResetBurst: 1000, streamResetPerSecond: 33)

    private func makeSession(_ configure: (inout HTTP2Session.Settings) -> Void = { _ in }) throws -> HTTP2Session {
        var s = Self.settings
        configure(&s)
        return try HTTP2Session.server(s, allocator: ByteBufferAllocator())
    }

    private func feed(_ session: HTTP2Session, _ bytes: [UInt8]) throws -> [HTTP2Session.Event] {
        var events: [HTTP2Session.Event] = []
        try session.feed(ByteBuffer(bytes: bytes), into: &events)
        return events
    }

    /// Everything the session has to send, over as many drains as it takes.
    private func drainAll(_ session: HTTP2Session, events: inout [HTTP2Session.Event]) throws -> ByteBuffer {
        var all = ByteBuffer()
        while true {
            var out: ByteBuffer?
            let more = try session.drain(into: &out, events: &events)
            if var out { all.writeBuffer(&out) }
            if !more { return all }
        }
    }

    private func drainFrames(_ session: HTTP2Session) throws -> [RawH2Frame] {
        var events: [HTTP2Session.Event] = []
        return RawH2Frame.parse(try drainAll(session, events: &events))
    }

    /// Runs a `TestH2Client` against the session until neither has anything to say;
    /// `onEvent` sees every event (and may submit, consume, resume).
    private func exchange(
        _ session: HTTP2Session, _ client: TestH2Client, onEvent: (HTTP2Session.Event) throws -> Void = { _ in }
    ) throws {
        for _ in 0..<100 {
            var events: [HTTP2Session.Event] = []
            let input = client.drainOutput()
            if input.readableBytes > 0 { try session.feed(input, into: &events) }
            for e in events { try onEvent(e) }
            events.removeAll()
            let output = try drainAll(session, events: &events)
            for e in events { try onEvent(e) }
            client.feed(output)
            if input.readableBytes == 0, output.readableBytes == 0, events.isEmpty { return }
        }
        Issue.record("the exchange did not settle")
    }

    private static func requestHeaders(_ stream: Int32, endStream: Bool, _ extra: [UInt8] = []) -> RawH2Frame {
        let block =
            HPACKBytes.methodGET + HPACKBytes.schemeHTTP + HPACKBytes.pathRoot + HPACKBytes.literal(index: 1, "gw.test")
            + extra
        let flags = RawH2Frame.endHeaders | (endStream ? RawH2Frame.endStream : 0)
        return RawH2Frame(.headers, flags: flags, stream: stream, payload: block)
    }

    // MARK: heads

    @Test func aPrefaceSettingsAndHeadersBecomeOneDecodedHead() throws {
        let session = try makeSession()
        let extra =
            HPACKBytes.literal("x-a", "1") + HPACKBytes.literal(index: 32, "a=1") + HPACKBytes.literal(index: 32, "b=2")
        let input =
            RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(1, endStream: true, extra).bytes
        let events = try feed(session, input)

        // The block began and ended within the fed bytes: only its end is recorded.
        #expect(events.count == 3, "\(events)")
        guard case .settingsReceived = events[0] else { Issue.record("\(events[0])"); return }
        guard case .headerBlockEnded(1) = events[1] else { Issue.record("\(events[1])"); return }
        guard case .head(1, let head, let endStream) = events[2] else { Issue.record("\(events[2])"); return }
        #expect(endStream)
        #expect(head.method == "GET")
        #expect(head.path == "/")
        #expect(head.authority == "gw.test")
        #expect(head.fields.map { "\($0.name): \($0.value)" } == ["x-a: 1", "cookie: a=1; b=2"])
        #expect(session.hasOpenStreams)
    }

    @Test func repeatedFieldsAndKnownNamesDecodeAsBeforeRequestAfterRequest() throws {
        let session = try makeSession()
        func raw(_ name: String, _ value: [UInt8]) -> [UInt8] {
            [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.count)] + value
        }
        let longAgent = "agent/1.0 (a value long enough for the heap)"
        // Per request: method literal, authority, user-agent, an obs-text value, an unknown name.
        let requests: [(method: String, authority: String, agent: String, language: [UInt8])] = [
            ("GET", "gw.test", longAgent, [0x65, 0xff]),
            ("PROPFIND", "gw.test", longAgent, [0x65, 0xff]),
            ("PATCH", "other.test", "agent/2", Array("en".utf8)),
            ("GET", "other.test", longAgent, []),
        ]
        var input = RawH2Frame.preface + RawH2Frame(.settings).bytes
        for (i, r) in requests.enumerated() {
            let block =
                HPACKBytes.literal(index: 2, r.method) + HPACKBytes.schemeHTTP + HPACKBytes.pathRoot
                + HPACKBytes.literal(index: 1, r.authority) + raw("user-agent", Array(r.agent.utf8))
                + raw("accept-language", r.language) + HPACKBytes.literal("x-custom-name", "v\(i)")
                + HPACKBytes.literal("accept", "*/*")
            input += RawH2Frame(.headers, flags: RawH2Frame.endHeaders | RawH2Frame.endStream, stream: Int32(2 * i + 1), payload: block).bytes
        }
        let heads = try feed(session, input).compactMap { e -> HTTP2HeaderBlock? in
            if case .head(_, let h, _) = e { return h } else { return nil }
        }
        #expect(heads.count == requests.count)
        for (i, (h, r)) in zip(heads, requests).enumerated() {
            #expect(h.method == r.method)
            #expect(h.path == "/")
            #expect(h.authority == r.authority)
            #expect(
                h.fields.map { "\($0.name): \($0.value)" } == [
                    "user-agent: \(r.agent)", "accept-language: \(String(decoding: r.language, as: UTF8.self))",
                    "x-custom-name: v\(i)", "accept: */*",
                ])
        }
        #expect(heads[0].fields.first(name: "accept-language") == "e\u{FFFD}", "invalid UTF-8 repaired, as before")
    }

    @Test func theFirstDrainSendsTheSettingsTheConnectionWindowAndTheAck() throws {
        let session = try makeSession { $0.maxConcurrentStreams = 7 }
        _ = try feed(session, RawH2Frame.preface + RawH2Frame(.settings).bytes)
        let frames = try drainFrames(session)

        #expect(frames.count == 3, "\(frames)")
        // The server's preface is its SETTINGS; the window update and the ACK follow in nghttp2's order.
        let own = try #require(frames.first)
        #expect(own.kind == .settings && own.flags == 0)
        let advertised = Dictionary(uniqueKeysWithValues: own.settings)
        #expect(advertised[3] == 7)  // MAX_CONCURRENT_STREAMS
        #expect(advertised[4] == 256 << 10)  // INITIAL_WINDOW_SIZE
        #expect(advertised[6] == 16 << 10)  // MAX_HEADER_LIST_SIZE
        #expect(advertised[9] == 1)  // NO_RFC7540_PRIORITIES: no priority tree for PRIORITY frames to build
        let window = try #require(frames.first { $0.kind == .windowUpdate })
        #expect(window.streamId == 0)
        #expect(window.word(0) == UInt32((1 << 20) - 65535))  // the connection window up to 1 MiB
        #expect(frames.contains { $0.kind == .settings && $0.flags == RawH2Frame.ack })
        #expect(!session.wantsWrite)
        #expect(session.wantsRead)
    }

    @Test(arguments: [false, true])
    func anUnfinishedHeadIsHandedOverOnceWithItsSizeOnTheWire(overLimit: Bool) throws {
        // 172 bytes of pseudo-headers, then x-a: 208 with "1", 307 with a 100-byte value.
        let session = try makeSession { $0.maxHeaderListBytes = 250 }
        let field = HPACKBytes.literal("x-a", overLimit ? String(repeating: "a", count: 100) : "1")
        var headers = Self.requestHeaders(1, endStream: true, field)
        headers.flags = RawH2Frame.endStream  // no END_HEADERS: CONTINUATIONs should follow
        let events = try feed(session, RawH2Frame.preface + RawH2Frame(.settings).bytes + headers.bytes)

        #expect(events.count == 2, "\(events)")  // SETTINGS, and the block's start
        let unfinished = try #require(session.takeUnfinishedHead())
        #expect(unfinished.head.path == "/")
        #expect(unfinished.wireBytes == headers.payload.count)
        #expect(unfinished.overLimit == overLimit)
        #expect(session.takeUnfinishedHead() == nil)
    }

    @Test func aHeadOverTheLimitKeepsItsPseudoHeadersDropsTheRestAndItsStreamStaysOpen() throws {
        let session = try makeSession { $0.maxHeaderListBytes = 200 }
        // The pseudo-headers count 172 bytes (RFC 9113: name + value + 32 each); x-big passes 200.
        let fields =
            HPACKBytes.literal("x-a", "1") + HPACKBytes.literal("x-big", String(repeating: "b", count: 120))
            + HPACKBytes.literal("x-more", "m") + HPACKBytes.literal(index: 32, "c=1")
        let input =
            RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(1, endStream: true, fields).bytes
        let events = try feed(session, input)

        var refused: [HTTP2HeaderBlock] = []
        for e in events {
            if case .head = e { Issue.record("a head over the limit was delivered as a request") }
            if case .trailersTooLarge = e { Issue.record("\(e)") }
            if case .headTooLarge(1, let head) = e { refused.append(head) }
        }
        #expect(refused.count == 1)
        #expect(refused.first?.method == "GET")
        #expect(refused.first?.path == "/")
        #expect(refused.first?.fields.isEmpty == true, "nothing of the head is kept past the limit, cookies included")
        #expect(session.hasOpenStreams, "the stream waits for its answer")
        #expect(try drainFrames(session).allSatisfy { $0.kind != .rstStream })
        // The owner answers on it.
        try session.submitResponse(1, status: 431, headers: [:], body: nil)
        let answer = try #require(try drainFrames(session).first { $0.kind == .headers })
        #expect(answer.streamId == 1)
    }

    /// One big dynamic-table entry, then a head of one-byte references to it:
    /// it decodes to far more than was sent, and nghttp2 checks every decoded
    /// byte. Past four times the limit the stream is reset (nghttp2 then only
    /// keeps its table in step) instead of decoding on for a 431; the
    /// connection serves on.
    @Test func aHeadOfReferencesToABigEntryIsResetNotDecodedOn() throws {
        let session = try makeSession { $0.maxHeaderListBytes = 16 << 10 }
        let entry = HPACKBytes.indexedLiteral("x", String(repeating: "a", count: 4000))
        let bomb = RawH2Frame(
            .headers, flags: RawH2Frame.endHeaders | RawH2Frame.endStream, stream: 3,
            payload: HPACKBytes.methodGET + HPACKBytes.schemeHTTP + HPACKBytes.pathRoot + HPACKBytes.literal(index: 1, "gw.test")
                + [UInt8](repeating: 0xBE, count: 4000))  // 16 MB decoded from 4 KB
        let input =
            RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(1, endStream: true, entry).bytes + bomb.bytes
            + Self.requestHeaders(5, endStream: true).bytes
        let events = try feed(session, input)
        #expect(events.contains { if case .head(1, _, endStream: true) = $0 { true } else { false } })
        #expect(!events.contains { if case .head(3, _, _) = $0 { true } else { false } })
        #expect(!events.contains { if case .headTooLarge(3, _) = $0 { true } else { false } })
        #expect(events.contains { if case .head(5, _, endStream: true) = $0 { true } else { false } })
        let resets = try drainFrames(session).filter { $0.kind == .rstStream }
        #expect(resets.map(\.streamId) == [3])
    }

    @Test func trailersOverTheLimitResetTheirStream() throws {
        let session = try makeSession { $0.maxHeaderListBytes = 300 }
        let trailers = RawH2Frame(
            .headers, flags: RawH2Frame.endHeaders | RawH2Frame.endStream, stream: 1,
            payload: HPACKBytes.literal("x-t", String(repeating: "t", count: 120)))
        let input =
            RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(1, endStream: false).bytes
            + trailers.bytes
        let events = try feed(session, input)

        #expect(events.contains { if case .head(1, _, endStream: false) = $0 { true } else { false } })
        #expect(events.contains { if case .trailersTooLarge(1) = $0 { true } else { false } })
        #expect(!events.contains { if case .end = $0 { true } else { false } })
        let resets = try drainFrames(session).filter { $0.kind == .rstStream }
        #expect(resets.map(\.streamId) == [1])
    }

    // MARK: frames an owner budgets

    @Test func pingsSettingsEmptyDataAndResetsAreReported() throws {
        let session = try makeSession()
        let ping = RawH2Frame(.ping, payload: [UInt8](repeating: 1, count: 8))
        let input =
            RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(1, endStream: false).bytes
            + ping.bytes + ping.bytes
            + RawH2Frame(.settings, flags: RawH2Frame.ack).bytes  // an ACK is not the peer's own SETTINGS
            + RawH2Frame(.data, stream: 1).bytes  // empty, stream open
            + RawH2Frame(.data, flags: 0x8, stream: 1, payload: [0]).bytes  // padded, no data: empty too
            + RawH2Frame(.data, flags: RawH2Frame.endStream, stream: 1).bytes  // empty but ends the stream
            + RawH2Frame(.rstStream, stream: 1, payload: RawH2Frame.be32(8)).bytes
        let events = try feed(session, input)

        let names = events.compactMap { e -> String? in
            switch e {
            case .settingsReceived: "settings"
            case .pingReceived: "ping"
            case .emptyDataReceived(let id): "empty-data \(id)"
            case .end(let id): "end \(id)"
            case .resetReceived(let id): "reset \(id)"
            case .closed(let id, let code): "closed \(id) \(code)"
            default: nil
            }
        }
        #expect(names == ["settings", "ping", "ping", "empty-data 1", "empty-data 1", "end 1", "reset 1", "closed 1 8"])
        #expect(!session.hasOpenStreams)
        let acks = try drainFrames(session).filter { $0.kind == .ping && $0.flags == RawH2Frame.ack }
        #expect(acks.count == 2)
    }

    /// A stream nghttp2 resets for the peer's error is told apart from one the
    /// peer reset and one the owner reset: only the first is
    /// `resetForPeerError` (MadeYouReset: the peer makes the server reset
    /// without sending RST_STREAM, which a rapid-reset budget must count).
    @Test func resetsThePeerCausedAreToldApartFromTheOnesItOrTheOwnerSent() throws {
        let session = try makeSession()
        let input =
            RawH2Frame.preface + RawH2Frame(.settings).bytes
            // 1: a window update past 2^31-1: nghttp2 resets it (FLOW_CONTROL_ERROR).
            + Self.requestHeaders(1, endStream: true).bytes
            + RawH2Frame(.windowUpdate, stream: 1, payload: RawH2Frame.be32(0x7fff_ffff)).bytes
            // 3: the peer resets it.
            + Self.requestHeaders(3, endStream: false).bytes + RawH2Frame(.rstStream, stream: 3, payload: RawH2Frame.be32(8)).bytes
            // 5: the owner will reset it.
            + Self.requestHeaders(5, endStream: false).bytes
        let events = try feed(session, input)
        session.reset(5, errorCode: 8)
        var more: [HTTP2Session.Event] = []
        _ = try drainAll(session, events: &more)
        let all = events + more
        let peerErrors = all.compactMap { e -> Int32? in if case .resetForPeerError(let id) = e { id } else { nil } }
        #expect(peerErrors == [1])
        let closed = all.compactMap { e -> Int32? in if case .closed(let id, _) = e { id } else { nil } }
        #expect(Set(closed) == [1, 3, 5])
        #expect(session.resetsAwaitingClose == 0)
    }

    /// RST_STREAM for streams that are closed or were skipped (nghttp2 reports
    /// each, and no close follows): nothing is kept for them, however many.
    @Test func resetsOfClosedStreamsLeaveNothingBehind() throws {
        let session = try makeSession()
        var input = RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(1001, endStream: false).bytes
        for id in stride(from: Int32(1), to: 1001, by: 2) {
            input += RawH2Frame(.rstStream, stream: id, payload: RawH2Frame.be32(8)).bytes
        }
        _ = try feed(session, input)
        #expect(session.resetsAwaitingClose == 0)
        #expect(session.hasOpenStreams)
    }

    // MARK: bodies

    /// A chunk small beside the buffer it came in is copied: a view would keep
    /// the whole buffer alive while the chunk waits (a byte of body per 64 KiB
    /// read). A chunk that fills a good part of it stays a view.
    @Test func aSmallChunkOfABigReadIsCopied() throws {
        let session = try makeSession()
        let head = Self.requestHeaders(1, endStream: false)
        var input = ByteBuffer()
        input.reserveCapacity(64 << 10)
        input.writeBytes(RawH2Frame.preface + RawH2Frame(.settings).bytes + head.bytes)
        input.writeBytes(RawH2Frame(.data, stream: 1, payload: [7]).bytes)
        input.writeBytes(RawH2Frame(.data, stream: 1, payload: [UInt8](repeating: 8, count: 16_000)).bytes)
        var events: [HTTP2Session.Event] = []
        try session.feed(input, into: &events)
        let chunks = events.compactMap { e -> ByteBuffer? in if case .data(1, let c) = e { c } else { nil } }
        #expect(chunks.map(\.readableBytes) == [1, 16_000])
        #expect(chunks.first.map { $0.storageCapacity < 1024 } == true, "the one-byte chunk keeps its own storage")
        #expect(chunks.last?.storageCapacity == input.storageCapacity, "the big one is a view")
    }

    @Test func dataThatLiesInTheFedBufferIsASliceOfIt() throws {
        let session = try makeSession()
        let client = TestH2Client()
        let body = (0..<3000).map { UInt8(truncatingIfNeeded: $0) }
        let id = client.request("POST", "/up", body: body)
        let input = client.drainOutput()
        var events: [HTTP2Session.Event] = []
        try session.feed(input, into: &events)

        var received: [UInt8] = []
        var chunks = 0
        var sliced = 0
        var ended = false
        input.withUnsafeReadableBytes { fed in
            let start = UInt(bitPattern: fed.baseAddress)
            let range = start..<start + UInt(fed.count)
            for e in events {
                if case .data(id, let chunk) = e {
                    chunks += 1
                    received += Array(chunk.readableBytesView)
                    chunk.withUnsafeReadableBytes { if range.contains(UInt(bitPattern: $0.baseAddress)) { sliced += 1 } }
                }
                if case .end(id) = e { ended = true }
            }
        }
        #expect(received == body)
        #expect(chunks > 0)
        #expect(sliced == chunks, "every chunk a view of the fed buffer, none copied")
        #expect(ended)
    }

    @Test func consumingTheBodyReopensTheWindowsAndOnlyThen() throws {
        for consumes in [true, false] {
            let session = try makeSession()
            let client = TestH2Client()
            // More than the 256 KiB stream window: it completes only if consumed bytes reopen it.
            let body = [UInt8](repeating: 7, count: 600 << 10)
            let id = client.request("POST", "/up", body: body)
            var received = 0
            var ended = false
            try exchange(session, client) { e in
                if case .data(id, let chunk) = e {
                    received += chunk.readableBytes
                    if consumes { session.consume(id, bytes: chunk.readableBytes) }
                }
                if case .end(id) = e { ended = true }
            }
            if consumes {
                #expect(received == body.count)
                #expect(ended)
            } else {
                #expect(received == 256 << 10, "the stream window, no more")
                #expect(!ended)
            }
        }
    }

    // MARK: responses

    @Test func aResponseIsSentWithItsRequestIdNeverIndexedAndItsSourceLetGoAtClose() throws {
        let session = try makeSession()
        let client = TestH2Client()
        let id = client.request("GET", "/r")
        weak var released: QueuedSource?
        try exchange(session, client) { e in
            guard case .head(id, _, _) = e else { return }
            let source = QueuedSource(Array("hello".utf8), ended: true)
            released = source
            let headers: HTTPHeaders = ["Content-Type": "text/plain", "X-Request-Id": "r-1"]
            try session.submitResponse(id, status: 200, headers: headers, body: source)
        }
        let r = try #require(client.responses[id])
        #expect(r.status == "200")
        #expect(r.header("content-type") == "text/plain")  // names lower-cased
        #expect(r.header("x-request-id") == "r-1")
        #expect(r.neverIndexed == ["x-request-id"])
        #expect(r.bodyString == "hello")
        #expect(r.closed && r.errorCode == 0)
        #expect(released == nil, "the session keeps a source only while its stream is open")
        #expect(!session.hasOpenStreams)
    }

    @Test func aResponseWithoutABodyEndsTheStreamWithItsHeaders() throws {
        let session = try makeSession()
        let client = TestH2Client()
        let id = client.request("GET", "/r")
        var framesOut: [RawH2Frame] = []
        for _ in 0..<10 {
            var events: [HTTP2Session.Event] = []
            try session.feed(client.drainOutput(), into: &events)
            for case .head(id, _, _) in events {
                try session.submitResponse(id, status: 204, headers: [:], body: nil)
            }
            let out = try drainAll(session, events: &events)
            framesOut += RawH2Frame.parse(out)
            client.feed(out)
        }
        let headers = try #require(framesOut.first { $0.kind == .headers })
        #expect(headers.streamId == id)
        #expect(headers.flags & RawH2Frame.endStream != 0)
        #expect(!framesOut.contains { $0.kind == .data })
        #expect(client.responses[id]?.status == "204")
    }

    @Test func anUpstreamHeadIsSentFromItsOwnBytesWithoutItsHopByHopFieldsOrItsRequestId() throws {
        let session = try makeSession()
        let client = TestH2Client()
        let id = client.request("GET", "/r")
        let text = Array("server: up\r\nconnection: close\r\nx-request-id: theirs\r\netag: \"e\"\r\n".utf8)
        func field(_ name: String, _ value: String, forward: Bool) -> UpstreamResponseHead.Field {
            let n = text.firstRange(of: Array((name + ": ").utf8))!.lowerBound
            return .init(
                nameStart: n, nameLength: name.utf8.count, valueStart: n + name.utf8.count + 2,
                valueLength: value.utf8.count, forward: forward)
        }
        let head = UpstreamResponseHead(
            status: 201, bytes: text,
            fields: [
                field("server", "up", forward: true), field("connection", "close", forward: false),
                field("x-request-id", "theirs", forward: false), field("etag", "\"e\"", forward: true),
            ])
        try exchange(session, client) { e in
            guard case .head(id, _, _) = e else { return }
            try session.submitUpstreamResponse(id, head: head, requestId: "ours", body: QueuedSource([], ended: true))
        }
        let r = try #require(client.responses[id])
        #expect(r.headers.map(\.0) == [":status", "server", "etag", "x-request-id"])
        #expect(r.status == "201")
        #expect(r.header("etag") == "\"e\"")
        #expect(r.header("x-request-id") == "ours")
        #expect(r.neverIndexed == ["x-request-id"])
        #expect(r.closed && r.errorCode == 0)
    }

    @Test func aDeferredSourceWaitsForResumeAndReportsWhenDrained() throws {
        let session = try makeSession()
        let client = TestH2Client()
        let id = client.request("GET", "/r")
        let source = QueuedSource()
        var drained = 0
        try exchange(session, client) { e in
            if case .head(id, _, _) = e { try session.submitResponse(id, status: 200, headers: [:], body: source) }
            if case .drained(id) = e { drained += 1 }
        }
        #expect(client.responses[id]?.status == "200")
        #expect(client.responses[id]?.closed == false)
        #expect(source.reads == 1, "asked once, then waits")
        #expect(!session.resume(99), "no such stream")

        source.queued = [UInt8](repeating: 1, count: 1000)
        source.lowWater = 500
        #expect(session.resume(id))
        #expect(!session.resume(id), "no longer waiting")
        try exchange(session, client) { e in if case .drained(id) = e { drained += 1 } }
        #expect(client.responses[id]?.body.count == 1000)
        #expect(drained == 1)

        source.ended = true
        #expect(session.resume(id))
        try exchange(session, client)
        #expect(client.responses[id]?.closed == true)
        #expect(client.responses[id]?.errorCode == 0)
    }

    /// A session whose drains move at most 20,000 bytes, answering a
    /// client's GET with `bytes` of body (not yet drained).
    private func cappedResponse(bytes: Int) throws
        -> (session: HTTP2Session, client: TestH2Client, id: Int32, events: [HTTP2Session.Event])
    {
        let session = try makeSession { $0.maxOutputPerDrain = 20_000 }
        let client = TestH2Client()
        let id = client.request("GET", "/r")
        var events: [HTTP2Session.Event] = []
        try session.feed(client.drainOutput(), into: &events)
        client.feed(try drainAll(session, events: &events))  // SETTINGS and the like
        try session.submitResponse(
            id, status: 200, headers: [:], body: QueuedSource([UInt8](repeating: 2, count: bytes), ended: true))
        return (session, client, id, events)
    }

    @Test func oneDrainMovesNoMoreThanItsCap() throws {
        var (session, client, id, events) = try cappedResponse(bytes: 60_000)

        var out: ByteBuffer?
        #expect(try session.drain(into: &out, events: &events))
        let first = try #require(out).readableBytes
        #expect(first >= 20_000 && first < 40_000, "\(first)")
        let rest = try drainAll(session, events: &events)
        client.feed(try #require(out))
        client.feed(rest)
        #expect(client.responses[id]?.body.count == 60_000)
    }

    /// The body's last DATA frame crosses the drain's cap: the trailers it
    /// queued are still owed, so the session still wants to write and the
    /// next drain sends them (nghttp2 finishes a sent frame only at its next
    /// `mem_send`, so it still wants to write too; `wantsWrite` does not lean
    /// on that).
    @Test func trailersQueuedByTheDrainThatHitItsCapGoOutNext() throws {
        var (session, client, id, events) = try cappedResponse(bytes: 30_000)
        session.setTrailers(id, ["grpc-status": "0"])

        var out: ByteBuffer?
        #expect(try session.drain(into: &out, events: &events))
        #expect(session.wantsWrite, "trailers are owed")
        let rest = try drainAll(session, events: &events)
        client.feed(try #require(out))
        client.feed(rest)
        #expect(client.responses[id]?.body.count == 30_000)
        #expect(client.responses[id]?.header("grpc-status") == "0")
        #expect(!session.wantsWrite)
    }

    // MARK: ending

    @Test func goAwayNamesTheLastStreamAndTerminateEndsTheSession() throws {
        let session = try makeSession()
        _ = try feed(session, RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(3, endStream: true).bytes)
        _ = try drainFrames(session)

        session.goAway()
        let goAway = try #require(try drainFrames(session).first { $0.kind == .goAway })
        #expect(goAway.word(0) == 3)  // last stream id
        #expect(goAway.word(1) == 0)  // NO_ERROR
        #expect(session.wantsRead, "open streams may still finish")

        session.terminate(errorCode: NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        let last = try #require(try drainFrames(session).first { $0.kind == .goAway })
        #expect(last.word(1) == NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        #expect(!session.wantsRead && !session.wantsWrite)
    }

    @Test func aFramingErrorQueuesGoAwayAndEndsTheSession() throws {
        let session = try makeSession()
        // SETTINGS with a 1-byte payload: FRAME_SIZE_ERROR for the whole connection.
        let bad = RawH2Frame.preface + RawH2Frame(.settings).bytes + [0, 0, 1, 4, 0, 0, 0, 0, 0, 9]
        _ = try? feed(session, bad)  // nghttp2 may or may not report it as a failed read
        let goAway = try #require(try drainFrames(session).first { $0.kind == .goAway })
        #expect(goAway.word(1) == 6 || goAway.word(1) == 1)  // FRAME_SIZE_ERROR (or PROTOCOL_ERROR)
        #expect(!session.wantsRead && !session.wantsWrite)
    }

    @Test func aClientThatIsNotHTTP2IsAnError() throws {
        let session = try makeSession()
        #expect(throws: HTTP2SessionError.self) { try feed(session, Array("GET / HTTP/1.1\r\n\r\n".utf8)) }
    }

    @Test func theSessionLetsGoOfItsSourcesWhenItGoes() throws {
        weak var released: QueuedSource?
        do {
            let session = try makeSession()
            _ = try feed(session, RawH2Frame.preface + RawH2Frame(.settings).bytes + Self.requestHeaders(1, endStream: true).bytes)
            let source = QueuedSource()
            released = source
            try session.submitResponse(1, status: 200, headers: [:], body: source)
            _ = try drainFrames(session)
            #expect(released != nil, "kept while its stream is open")
        }
        #expect(released == nil)
    }

    // MARK: stream state lifetime

    @Test func everyStreamsStateIsFreedOnceWhetherItEndsIsResetOrIsRefused() throws {
        let session = try makeSession { $0.maxConcurrentStreams = 8 }
        let client = TestH2Client()
        var released: [() -> Bool] = []
        var closed: [Int32: Int] = [:]
        for round in 0..<20 {
            // Ten per round, two over the limit (refused by nghttp2): some
            // answered with a body, some without, some reset by the client, some by us.
            var ids: [Int32] = []
            for i in 0..<10 { ids.append(client.request("GET", "/r\(round)-\(i)")) }
            for id in ids where Int(id) % 7 == 3 { client.reset(id) }
            try exchange(session, client) { e in
                switch e {
                case .head(let id, _, _):
                    switch Int(id) % 5 {
                    case 0: session.reset(id, errorCode: NGHTTP2_CANCEL.rawValue)
                    case 1: try session.submitResponse(id, status: 204, headers: [:], body: nil)
                    default:
                        weak var source: QueuedSource?
                        let s = QueuedSource(Array("body".utf8), ended: true)
                        source = s
                        released.append { source == nil }
                        try session.submitResponse(id, status: 200, headers: [:], body: s)
                    }
                case .closed(let id, _):
                    closed[id, default: 0] += 1
                default: break
                }
            }
            #expect(session.openStreams == 0, "round \(round)")
            #expect(!session.hasOpenStreams)
        }
        #expect(closed.values.allSatisfy { $0 == 1 }, "one close per stream")
        #expect(released.allSatisfy { $0() }, "every source let go at its stream's close")
    }

    @Test func aResponseForAStreamAlreadyClosedKeepsNoSourceAndNeverReachesTheStreamAfterIt() throws {
        let session = try makeSession()
        let client = TestH2Client()
        let first = client.request("GET", "/a")
        try exchange(session, client) { e in
            if case .head(first, _, _) = e { try session.submitResponse(first, status: 204, headers: [:], body: nil) }
        }
        #expect(session.openStreams == 0)
        // The next stream takes the first one's slot.
        let second = client.request("GET", "/b")
        try exchange(session, client)
        #expect(session.openStreams == 1)
        weak var released: QueuedSource?
        do {
            let late = QueuedSource(Array("late".utf8), ended: true)
            released = late
            // nghttp2 takes it (it checks the stream only when sending) but nothing will read it.
            try? session.submitResponse(first, status: 200, headers: [:], body: late)
        }
        #expect(released == nil, "no slot holds a closed stream's source")
        let answer = QueuedSource(Array("second".utf8), ended: true)
        try session.submitResponse(second, status: 200, headers: [:], body: answer)
        try exchange(session, client)
        #expect(client.responses[second]?.bodyString == "second")
        #expect(session.openStreams == 0)
    }
}
