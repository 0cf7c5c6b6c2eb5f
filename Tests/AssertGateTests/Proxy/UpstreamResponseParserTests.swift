import NIOCore
import Testing

@testable import AssertGateCore

@Suite struct UpstreamResponseParserTests {
    /// What the parser reported for `chunks` fed one after another.
    struct Outcome: Equatable {
        var status: Int?
        var keepAlive: Bool?
        var interims: [Int] = []
        var forwarded: [String] = []
        var body = ""
        var ends = 0
        var error: UpstreamResponseError?
        /// Bytes left in the last chunk after the end.
        var leftover = 0
    }

    private func run(_ chunks: [String], isHead: Bool = false, close: Bool = false) -> Outcome {
        var parser = UpstreamResponseParser()
        parser.expectResponse(isHead: isHead)
        var out = Outcome()
        do {
            for chunk in chunks {
                var buffer = ByteBuffer(string: chunk)
                loop: while true {
                    switch try parser.next(&buffer) {
                    case .needMore: break loop
                    case .interim(let head): out.interims.append(head.status)
                    case .head(let head, let keepAlive):
                        out.status = head.status
                        out.keepAlive = keepAlive
                        head.forEachForwarded { n, v in
                            out.forwarded.append(String(decoding: n, as: UTF8.self) + ": " + String(decoding: v, as: UTF8.self))
                        }
                    case .body(let slice): out.body += String(buffer: slice)
                    case .end:
                        out.ends += 1
                        out.leftover = buffer.readableBytes
                        break loop
                    }
                }
            }
            if close, parser.connectionClosed() { out.ends += 1 }
        } catch {
            out.error = error
        }
        return out
    }

    /// Every split of `text` into two reads gives the same outcome as one read.
    private func splitsAgree(_ text: String, isHead: Bool = false) {
        let whole = run([text], isHead: isHead)
        let bytes = Array(text.utf8)
        for i in 1..<bytes.count {
            let a = String(decoding: bytes[..<i], as: UTF8.self)
            let b = String(decoding: bytes[i...], as: UTF8.self)
            #expect(run([a, b], isHead: isHead) == whole, "split at \(i)")
        }
    }

    @Test func contentLengthResponseWithHopByHopFieldsDropped() {
        let r = run([
            "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: application/json\r\nContent-Length: 5\r\n"
                + "Connection: keep-alive, X-Internal\r\nX-Internal: 1\r\nKeep-Alive: timeout=5\r\n"
                + "X-Request-Id: upstream\r\nProxy-Foo: x\r\n\r\nhello"
        ])
        #expect(r.status == 200)
        #expect(r.keepAlive == true)
        #expect(r.forwarded == ["server: nginx", "content-type: application/json", "content-length: 5"])
        #expect(r.body == "hello")
        #expect(r.ends == 1)
        #expect(r.error == nil)
    }

    @Test func everySplitOfAResponseParsesTheSame() {
        splitsAgree("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nDate: x\r\n\r\nabc")
        splitsAgree("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n")
        splitsAgree("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\nServer: s\n\n")
    }

    /// Interim heads before the final one: a 103 (or 102) is reported with
    /// its fields, a 100 is not (the gateway answers `Expect` itself).
    @Test func interimHeadsAreReportedButA100() {
        let r = run([
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: x\r\n\r\n"
                + "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        ])
        #expect(r.interims == [103, 102])
        #expect(r.status == 200 && r.body == "ok" && r.ends == 1)
    }

    @Test func chunkedBodiesAndTrailers() {
        let r = run(["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\nhello\r\n", "6\r\n world\r\n0\r\n\r\n"])
        #expect(r.body == "hello world")
        #expect(r.ends == 1)
        #expect(r.forwarded.isEmpty)
        #expect(r.keepAlive == true)
        let trailers = run(["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\nA: b\r\nC: d\r\n\r\n"])
        #expect(trailers.body == "0123456789")
        #expect(trailers.ends == 1)
    }

    @Test func bodylessResponses() {
        for text in [
            "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        ] {
            let r = run([text])
            #expect(r.ends == 1 && r.body.isEmpty && r.error == nil, "\(text)")
        }
        let head = run(["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"], isHead: true)
        #expect(head.ends == 1)
        #expect(head.forwarded == ["content-length: 10"])
    }

    @Test func bodiesDelimitedByTheClose() {
        let r = run(["HTTP/1.0 200 OK\r\n\r\nsome", " bytes"], close: true)
        #expect(r.body == "some bytes")
        #expect(r.keepAlive == false)
        #expect(r.ends == 1)
        // An empty element or field adds no coding: chunked framing still ends it.
        let te = run(["HTTP/1.1 200 OK\r\nTransfer-Encoding: , chunked\r\nTransfer-Encoding: \r\n\r\n2\r\nzz\r\n0\r\n\r\n"])
        #expect(te.body == "zz" && te.keepAlive == true && te.ends == 1)
        // A close in the middle of a length-framed body does not complete it.
        let cut = run(["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], close: true)
        #expect(cut.ends == 0)
    }

    @Test func keepAliveFollowsVersionAndConnection() {
        #expect(run(["HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"]).keepAlive == false)
        #expect(run(["HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"]).keepAlive == false)
        #expect(run(["HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"]).keepAlive == true)
        #expect(run(["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).keepAlive == true)
        // HTTP/1.0 with Transfer-Encoding: closed after, whatever Connection says (RFC 9112 §6.1).
        #expect(run(["HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]).keepAlive == false)
    }

    /// The parser reuses its head storage from one response to the next on a
    /// keep-alive connection: a head the caller keeps must keep its own bytes
    /// and fields when later heads (of other sizes, after an interim one) are parsed.
    @Test func aKeptHeadIsUntouchedByTheNextResponses() throws {
        var parser = UpstreamResponseParser()
        var kept: [UpstreamResponseHead] = []
        let responses = [
            "HTTP/1.1 200 OK\r\nServer: A\r\nContent-Length: 1\r\n\r\na",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nX-Long-Name: " + String(repeating: "v", count: 300)
                + "\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 201 Created\r\nB: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ]
        for text in responses {
            parser.expectResponse(isHead: false)
            var buffer = ByteBuffer(string: text)
            loop: while true {
                switch try parser.next(&buffer) {
                case .head(let head, _): kept.append(head)
                case .end, .needMore: break loop
                case .body, .interim: continue
                }
            }
        }
        func fields(_ head: UpstreamResponseHead) -> [String] {
            var out: [String] = []
            head.forEachForwarded { n, v in out.append(String(decoding: n, as: UTF8.self) + ": " + String(decoding: v, as: UTF8.self)) }
            return out
        }
        #expect(kept.map(\.status) == [200, 404, 201])
        #expect(fields(kept[0]) == ["server: A", "content-length: 1"])
        #expect(fields(kept[1]) == ["x-long-name: " + String(repeating: "v", count: 300), "content-length: 0"])
        #expect(fields(kept[2]) == ["b: 2"])
    }

    /// A pooled connection does not keep the storage of one big head for
    /// as long as it lives; an ordinary head's is kept (no allocation per response).
    @Test func theStorageOfABigHeadIsLetGo() throws {
        var parser = UpstreamResponseParser()
        func parse(_ text: String) throws {
            parser.expectResponse(isHead: false)
            var buffer = ByteBuffer(string: text)
            loop: while true {
                switch try parser.next(&buffer) {
                case .end, .needMore: break loop
                case .head, .body, .interim: continue
                }
            }
        }
        try parse("HTTP/1.1 200 OK\r\nX-Big: " + String(repeating: "b", count: 40_000) + "\r\nContent-Length: 0\r\n\r\n")
        #expect(parser.retainedHeadCapacity >= 40_000)
        try parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(parser.retainedHeadCapacity < UpstreamResponseParser.keptHeadCapacity)
        let small = parser.retainedHeadCapacity
        try parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(parser.retainedHeadCapacity == small)
    }

    @Test func bytesAfterTheResponseAreLeftForTheCaller() {
        let r = run(["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"])
        #expect(r.ends == 1)
        #expect(r.leftover == "HTTP/1.1 200 OK\r\n".utf8.count)
        var parser = UpstreamResponseParser()
        var stray = ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n")
        #expect(throws: UpstreamResponseError.unexpectedBytes) { try parser.next(&stray) }
    }

    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", UpstreamResponseError.conflictingFraming),
        ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", .badContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n", .badContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", .badContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", .badContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", .badContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n", .badContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", .badContentLength),
        ("HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", .malformedField),
        ("HTTP/1.1 200 OK\r\nX : a\r\n\r\n", .malformedField),
        ("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", .malformedField),
        ("HTTP/1.1 200 OK\r\nX: a\u{0}b\r\n\r\n", .malformedField),
        ("HTTP/1.1 200 OK\r\n: a\r\n\r\n", .malformedField),
        ("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", .malformedField),
        ("HTTP/2.0 200 OK\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 20 OK\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 099 Low\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 600 High\r\nContent-Length: 0\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", .unsupportedTransferCoding),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz", .unsupportedTransferCoding),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .unsupportedTransferCoding),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", .unsupportedTransferCoding),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\nzz", .unsupportedTransferCoding),
        ("http/1.1 200 OK\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", .switchingProtocols),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZ\r\n", .malformedChunk),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", .malformedChunk),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1234567890abcdef0\r\n", .malformedChunk),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX", .malformedChunk),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: b\rc\r\n\r\n", .malformedChunk),
    ])
    func malformedResponsesAreRefused(_ text: String, _ expected: UpstreamResponseError) {
        #expect(run([text]).error == expected)
    }

    @Test func limitsBoundWhatIsBuffered() {
        let field = "X-Pad: " + String(repeating: "p", count: 1000) + "\r\n"
        let longHead = "HTTP/1.1 200 OK\r\n" + String(repeating: field, count: 70)
        // In one read and trickled, the head is refused once it passes 64 KiB.
        #expect(run([longHead + "\r\n"]).error == .headTooLarge)
        #expect(run(Array(repeating: field, count: 70).enumerated().map { $0.offset == 0 ? "HTTP/1.1 200 OK\r\n" + $0.element : $0.element }).error == .headTooLarge)
        let many = "HTTP/1.1 200 OK\r\n" + String(repeating: "A: b\r\n", count: 300) + "\r\n"
        #expect(run([many]).error == .tooManyFields)
        let ext = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "e", count: 2000) + "\r\n"
        #expect(run([ext]).error == .malformedChunk)
        let trailers = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
            + String(repeating: "T: " + String(repeating: "t", count: 1000) + "\r\n", count: 70)
        #expect(run([trailers]).error == .trailersTooLarge)
    }

    /// The end of the head is found with memchr: heads with CR LF, bare LF,
    /// LF CR LF and stray CRs parse the same in one read, split at every byte
    /// boundary, and a byte at a time.
    @Test func theEndOfTheHeadIsFoundWhereverTheReadsSplit() {
        let heads = [
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nok",
            "HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\nok",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok",
            "HTTP/1.1 200 OK\nContent-Length: 2\r\n\nok",
            "HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n",
            // refused once the head is complete: a bare CR, a CR CR before the LF
            "HTTP/1.1 200 OK\r\nX-A: b\r\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-A: b\r\n\r\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-A: b\rc\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-A: b\r\n folded\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-A: b\r\n\tfolded\r\n\r\n",
        ]
        for head in heads {
            splitsAgree(head)
            let whole = run([head])
            #expect(run(head.utf8.map { String(decoding: [$0], as: UTF8.self) }) == whole, "\(head.debugDescription)")
        }
        #expect(run([heads[0]]).body == "ok")
        #expect(run([heads[1]]).body == "ok")
        #expect(run([heads[2]]).body == "ok")
        #expect(run([heads[3]]).body == "ok")
        #expect(run([heads[4]]).ends == 1)
        for refused in heads[5...] { #expect(run([refused]).error == .malformedField, "\(refused.debugDescription)") }
    }

    /// Values lose their surrounding whitespace, keep inner tabs, and any
    /// control byte but HTAB (or DEL) is refused, in the reason phrase too.
    @Test func fieldValuesAndReasonPhrasesAreCheckedByteForByte() {
        let r = run(["HTTP/1.1 200 Fine \t reason\r\nX-A: \t a\tb  \t\r\nX-Empty:   \r\nContent-Length: 0\r\n\r\n"])
        #expect(r.error == nil)
        #expect(r.forwarded == ["x-a: a\tb", "x-empty: ", "content-length: 0"])
        for bad: UInt8 in [0x00, 0x01, 0x0B, 0x0C, 0x1F, 0x7F] {
            let b = String(decoding: [bad], as: UTF8.self)
            #expect(run(["HTTP/1.1 200 OK\r\nX-A: a" + b + "b\r\n\r\n"]).error == .malformedField, "\(bad)")
            #expect(run(["HTTP/1.1 200 O" + b + "K\r\n\r\n"]).error == .malformedStatusLine, "\(bad)")
            #expect(run(["HTTP/1.1 200 OK\r\nX" + b + "A: a\r\n\r\n"]).error == .malformedField, "\(bad)")
        }
        // Bytes above 0x7F are allowed in values, not in names.
        #expect(run(["HTTP/1.1 200 OK\r\nX-A: caf\u{E9}\r\nContent-Length: 0\r\n\r\n"]).forwarded == ["x-a: caf\u{E9}", "content-length: 0"])
        #expect(run(["HTTP/1.1 200 OK\r\nX-\u{E9}: a\r\n\r\n"]).error == .malformedField)
        // Names are lower-cased; every token byte is kept.
        #expect(run(["HTTP/1.1 200 OK\r\nX-!#$%&'*+.^_`|~09AZ: v\r\nContent-Length: 0\r\n\r\n"]).forwarded == ["x-!#$%&'*+.^_`|~09az: v", "content-length: 0"])
    }

    /// The word-at-a-time value scan stops where a byte-at-a-time one does:
    /// every byte value at every position of runs that cross word
    /// boundaries, after tabs and bytes above 0x7F, from several offsets.
    @Test func theValueScanStopsWhereAByteScanStops() {
        func naive(_ a: [UInt8], _ start: Int) -> Int {
            var i = start
            while i < a.count, !(a[i] < 0x20 || a[i] == 0x7F) || a[i] == 0x09 { i += 1 }
            return i
        }
        let fillers: [[UInt8]] = [Array("abcdefgh".utf8), [0x09, 0x20, 0x80, 0xFF, 0x7E, 0x21, 0x09, 0xA0]]
        for filler in fillers {
            for length in 0...19 {
                let run = (0..<length).map { filler[$0 % filler.count] }
                for k in 0...length {
                    for v in 0...255 {
                        var a = run
                        if k < length { a[k] = UInt8(v) } else { a.append(UInt8(v)) }
                        for start in [0, 1, 3] where start <= a.count {
                            let got = a.withUnsafeBufferPointer { ASCII.fieldValueRun($0, from: start) }
                            if got != naive(a, start) {
                                Issue.record("\(a) from \(start): \(got), expected \(naive(a, start))")
                                return
                            }
                        }
                    }
                }
            }
        }
    }

    @Test func interimResponsesAreSkipped() {
        let r = run(["HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"])
        #expect(r.status == 200)
        #expect(r.body == "x")
        #expect(r.forwarded == ["content-length: 1"])
    }
}
