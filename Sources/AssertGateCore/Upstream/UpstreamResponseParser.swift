import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why an upstream's response could not be read. The connection is closed;
/// the exchange fails as `connectionLost` (502 before the head was sent).
enum UpstreamResponseError: Error, Equatable {
    case headTooLarge
    case tooManyFields
    case malformedStatusLine
    case malformedField
    case badContentLength
    /// Both `Transfer-Encoding` and `Content-Length`: a smuggling or
    /// splitting signal that RFC 9112 §6.3 says to treat as an error.
    case conflictingFraming
    /// A transfer coding other than one `chunked` (gzip, deflate, chunked
    /// twice): the gateway would have to strip it and hand the client bytes
    /// it cannot name (there is no `Content-Encoding` for them), so it
    /// refuses, as nginx does.
    case unsupportedTransferCoding
    case switchingProtocols
    case malformedChunk
    case trailersTooLarge
    /// Bytes after a complete response, or before any request was sent.
    case unexpectedBytes
}

/// What the parser reports, in order: one head, body slices, one end.
enum UpstreamResponseEvent {
    /// An interim head (1xx but `100` and `101`), before the final one.
    case interim(UpstreamResponseHead)
    case head(UpstreamResponseHead, keepAlive: Bool)
    case body(ByteBuffer)
    case end
    /// Everything given so far is consumed.
    case needMore
}

/// An incremental HTTP/1.1 response parser for the upstream side (RFC 9112),
/// made for the proxy's one job: find the framing, hand the header bytes on
/// without building a `String` per field, and pass body bytes as slices of
/// the socket's buffers. Strict where leniency is a smuggling risk (both
/// framings, obs-fold, bare CR, spaces before the colon, bad lengths) and
/// bounded everywhere: head 64 KiB and 256 fields, chunk-size lines 1 KiB,
/// trailers 64 KiB (read and dropped, as the HTTP/2 side sends none).
struct UpstreamResponseParser {
    static let maxHeadBytes = 64 << 10
    static let maxFields = 256
    static let maxChunkLineBytes = 1024
    static let maxTrailerBytes = 64 << 10

    private enum State {
        /// No request outstanding: any byte is unexpected.
        case idle
        case head
        case length(Int)
        case chunkSize(size: Int, digits: Int, inExtension: Bool, lineBytes: Int, sawCR: Bool)
        case chunkData(Int)
        case chunkDataEnd(sawCR: Bool)
        case trailers(bytes: Int)
        case untilClose
    }

    private var state = State.idle
    /// The head block being read (bytes of earlier reads while it is
    /// incomplete), then the parsed head's bytes. Kept across responses with
    /// its capacity, as is `fieldStore`: the head event shares both, and once
    /// the delegate has read it (its contract) they are unique again, so a
    /// keep-alive connection parses every later head without allocating.
    private var pendingHead: [UInt8] = []
    private var fieldStore: [UpstreamResponseHead.Field] = []
    /// Where the end-of-head search stands: 1 after a LF, 2 after LF CR.
    private var lineEnd = 0
    private var noBody = false
    /// The body ended with the last event; `.end` comes next.
    private var pendingEnd = false

    /// A request was written: its response comes next (`isHead`: it has no body).
    mutating func expectResponse(isHead: Bool) {
        state = .head
        noBody = isHead
        pendingEnd = false
        // Storage grown by one big head is let go: a pooled connection would
        // otherwise hold up to the 64 KiB limit for as long as it lives.
        pendingHead.removeAll(keepingCapacity: pendingHead.capacity <= Self.keptHeadCapacity)
        if fieldStore.capacity > Self.keptFieldCapacity { fieldStore = [] }
        lineEnd = 0
    }

    static let keptHeadCapacity = 8 << 10
    static let keptFieldCapacity = 64
    /// Tests: the head storage kept between responses.
    var retainedHeadCapacity: Int { pendingHead.capacity }

    /// The connection closed: true when that completes the body (one delimited by the close).
    mutating func connectionClosed() -> Bool {
        guard case .untilClose = state else { return false }
        state = .idle
        return true
    }

    /// The next event from `buffer`. Returns `.end` before looking at any byte
    /// after a response, so the caller can release (or reuse) the connection
    /// first; bytes left after an end are the caller's to refuse. Call until
    /// `.needMore`.
    mutating func next(_ buffer: inout ByteBuffer) throws(UpstreamResponseError) -> UpstreamResponseEvent {
        if pendingEnd {
            pendingEnd = false
            return .end
        }
        while buffer.readableBytes > 0 {
            switch state {
            case .idle:
                throw .unexpectedBytes
            case .head:
                guard try takeHead(&buffer) else { return .needMore }
                if let event = try startBody() { return event }
            case .length(let remaining):
                let n = min(remaining, buffer.readableBytes)
                guard let slice = buffer.readSlice(length: n) else { return .needMore }
                if remaining == n {
                    state = .idle
                    pendingEnd = true
                } else {
                    state = .length(remaining - n)
                }
                return .body(slice)
            case .untilClose:
                guard let slice = buffer.readSlice(length: buffer.readableBytes) else { return .needMore }
                return .body(slice)
            case .chunkSize, .chunkDataEnd, .trailers:
                if try chunkFraming(&buffer) { return .end }
            case .chunkData(let remaining):
                let n = min(remaining, buffer.readableBytes)
                guard let slice = buffer.readSlice(length: n) else { return .needMore }
                state = remaining == n ? .chunkDataEnd(sawCR: false) : .chunkData(remaining - n)
                return .body(slice)
            }
        }
        return .needMore
    }

    // MARK: head

    /// True when `pendingHead` holds the complete head block; false when more bytes are needed.
    private mutating func takeHead(_ buffer: inout ByteBuffer) throws(UpstreamResponseError) -> Bool {
        var state = lineEnd
        let end: Int? = buffer.withUnsafeReadableBytes { raw in
            // state: 0 in a line, 1 after a LF, 2 after LF CR; a LF in state 1 or 2 ends the head.
            // Inside a line only a LF can change the state: memchr jumps to it
            // (as llhttp does) instead of looking at every byte.
            guard let base = raw.baseAddress else { return nil }
            let n = raw.count
            var i = 0
            while i < n {
                if state == 0 {
                    guard let lf = memchr(base + i, 0x0A, n - i) else { return nil }
                    i = base.distance(to: UnsafeRawPointer(lf)) + 1
                    state = 1
                    continue
                }
                let b = raw[i]
                i += 1
                if b == UInt8(ascii: "\n") { return i }
                state = (b == UInt8(ascii: "\r") && state == 1) ? 2 : 0
            }
            return nil
        }
        guard let end else {
            lineEnd = state
            guard pendingHead.count + buffer.readableBytes <= Self.maxHeadBytes else { throw .headTooLarge }
            buffer.withUnsafeReadableBytes { pendingHead.append(contentsOf: $0) }
            buffer.moveReaderIndex(to: buffer.writerIndex)
            return false
        }
        guard pendingHead.count + end <= Self.maxHeadBytes else { throw .headTooLarge }
        lineEnd = 0
        buffer.withUnsafeReadableBytes { pendingHead.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<end])) }
        buffer.moveReaderIndex(forwardBy: end)
        return true
    }

    /// The head event, an interim one, or nil for a `100` (the gateway
    /// answers `Expect` itself and never sends it upstream).
    private mutating func startBody() throws(UpstreamResponseError) -> UpstreamResponseEvent? {
        var parsed = try Self.parseHead(inPlace: &pendingHead, fields: &fieldStore)
        if parsed.head.status < 200 {
            // 101 would hand the connection to another protocol; nothing here asked for one.
            if parsed.head.status == 101 { throw .switchingProtocols }
            pendingHead.removeAll(keepingCapacity: true)
            // The final head follows; a 103's hints are passed on (RFC 9110 §15.2).
            return parsed.head.status == 100 ? nil : .interim(parsed.head)
        }
        let bodyless = noBody || parsed.head.status == 204 || parsed.head.status == 304
        if parsed.transferEncoded, parsed.contentLength != nil { throw .conflictingFraming }
        // A Transfer-Encoding field with no coding in it.
        if parsed.transferEncoded, !parsed.chunked { throw .unsupportedTransferCoding }
        if bodyless {
            state = .idle
            pendingEnd = true
        } else if parsed.transferEncoded {
            state = .chunkSize(size: 0, digits: 0, inExtension: false, lineBytes: 0, sawCR: false)
        } else if let length = parsed.contentLength {
            state = length == 0 ? .idle : .length(length)
            pendingEnd = length == 0
        } else {
            state = .untilClose
        }
        if case .untilClose = state { parsed.keepAlive = false }
        return .head(parsed.head, keepAlive: parsed.keepAlive)
    }

    struct ParsedHead {
        var head: UpstreamResponseHead
        var keepAlive: Bool
        var contentLength: Int?
        var transferEncoded = false
        var chunked = false
    }

    /// Parses a complete head block (status line, fields, empty line).
    static func parseHead(_ input: [UInt8]) throws(UpstreamResponseError) -> ParsedHead {
        var bytes = input
        var fields: [UpstreamResponseHead.Field] = []
        return try parseHead(inPlace: &bytes, fields: &fields)
    }

    /// The scalars of a parsed head, before its fields are shared with the event.
    private struct HeadScan {
        var status = 0
        var keepAlive = false
        var contentLength: Int?
        var transferEncoded = false
        var chunked = false
        var listsOthers = false
    }

    /// Parses the head block in `bytes`, lower-casing the names in place, into
    /// `fields` (emptied first, capacity kept); the result shares both arrays.
    /// One pass over the bytes through a pointer: no copy, no per-byte bounds
    /// or uniqueness check, no array per `Connection` or `Transfer-Encoding` list.
    static func parseHead(
        inPlace bytes: inout [UInt8], fields: inout [UpstreamResponseHead.Field]
    ) throws(UpstreamResponseError) -> ParsedHead {
        fields.removeAll(keepingCapacity: true)
        if fields.capacity < 16 { fields.reserveCapacity(16) }
        // The table is read through a pointer: no bounds check or global accessor per byte.
        let scanned: Result<HeadScan, UpstreamResponseError> = bytes.withUnsafeMutableBufferPointer { buf in
            ASCII.tokenLowerTable.withUnsafeBufferPointer { table in
                do throws(UpstreamResponseError) {
                    return .success(try Self.scan(buf, tokenLower: table, into: &fields))
                } catch {
                    return .failure(error)
                }
            }
        }
        let found: HeadScan
        switch scanned {
        case .success(let s): found = s
        case .failure(let e): throw e
        }
        if found.listsOthers { Self.dropListed(&fields, bytes) }
        return ParsedHead(
            head: UpstreamResponseHead(status: found.status, bytes: bytes, fields: fields), keepAlive: found.keepAlive,
            contentLength: found.contentLength, transferEncoded: found.transferEncoded, chunked: found.chunked)
    }

    /// The index of the first byte at or after `i` that is a control byte
    /// other than HTAB, or DEL (CR and LF included); `p.count` if none.
    @inline(__always)
    private static func fieldRun(_ p: UnsafeMutableBufferPointer<UInt8>, _ start: Int) -> Int {
        ASCII.fieldValueRun(UnsafeBufferPointer(p), from: start)
    }

    private static func scan(
        _ p: UnsafeMutableBufferPointer<UInt8>, tokenLower: UnsafeBufferPointer<UInt8>,
        into fields: inout [UpstreamResponseHead.Field]
    ) throws(UpstreamResponseError) -> HeadScan {
        let count = p.count
        var out = HeadScan()
        // "HTTP/1.x SSS"
        guard count >= 12, Self.startsExactly(p, "HTTP/1."), p[8] == UInt8(ascii: " ") else {
            throw .malformedStatusLine
        }
        let minor = p[7]
        guard minor == UInt8(ascii: "0") || minor == UInt8(ascii: "1") else { throw .malformedStatusLine }
        var status = 0
        for i in 9..<12 {
            guard let d = ASCII.digit(p[i]) else { throw .malformedStatusLine }
            status = status * 10 + d
        }
        // RFC 9110 §15: three digits, 100 to 599.
        guard status >= 100, status <= 599 else { throw .malformedStatusLine }
        out.status = status
        var i = 12
        // The reason phrase: anything but control bytes, up to the line end.
        // Any other control byte stops the run and fails `lineEnd` below (as
        // a bare CR does): one comparison per byte in the common case.
        if p[i] == UInt8(ascii: " ") { i = Self.fieldRun(p, i) }
        i = try Self.lineEnd(p, i, error: .malformedStatusLine)

        out.keepAlive = minor == UInt8(ascii: "1")
        while i < count, p[i] != UInt8(ascii: "\r"), p[i] != UInt8(ascii: "\n") {
            guard fields.count < maxFields else { throw .tooManyFields }
            // name: a token, lower-cased in place, directly followed by ':'
            // (one table load per byte: 0 for every non-token byte, ':' included)
            let nameStart = i
            while i < count {
                let l = tokenLower[Int(p[i])]
                if l == 0 { break }
                p[i] = l
                i += 1
            }
            guard i < count, i > nameStart, p[i] == UInt8(ascii: ":") else { throw .malformedField }
            let nameLength = i - nameStart
            i += 1
            while i < count, p[i] == UInt8(ascii: " ") || p[i] == 0x09 { i += 1 }
            let valueStart = i
            // A control byte other than HTAB (or DEL) ends the run; unless it
            // is the CRLF or LF that ends the line, `lineEnd` refuses it.
            i = Self.fieldRun(p, i)
            var valueEnd = i
            while valueEnd > valueStart, p[valueEnd - 1] == UInt8(ascii: " ") || p[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            i = try Self.lineEnd(p, i, error: .malformedField)
            // obs-fold (a continuation line) is refused, as RFC 9112 §5.2 allows.
            if i < count, p[i] == UInt8(ascii: " ") || p[i] == 0x09 { throw .malformedField }
            var forward = true
            switch HopByHop.classify(UnsafeBufferPointer(rebasing: p[nameStart..<nameStart + nameLength])) {
            case .connection:
                forward = false
                var s = valueStart
                while s < valueEnd {
                    var e = s
                    while e < valueEnd, p[e] != UInt8(ascii: ",") { e += 1 }
                    let (a, b) = Self.trimmed(p, s, e)
                    if Self.equals(p, a, b, "close") {
                        out.keepAlive = false
                    } else if Self.equals(p, a, b, "keep-alive") {
                        if minor == UInt8(ascii: "0") { out.keepAlive = true }
                    } else if a < b {
                        out.listsOthers = true
                    }
                    s = e + 1
                }
            case .transferEncoding:
                forward = false
                out.transferEncoded = true
                // Exactly one coding over every field, and it is chunked (a
                // later field continues the list; empty elements are skipped).
                var s = valueStart
                while s < valueEnd {
                    var e = s
                    while e < valueEnd, p[e] != UInt8(ascii: ",") { e += 1 }
                    let (a, b) = Self.trimmed(p, s, e)
                    if a < b {
                        guard !out.chunked, Self.equals(p, a, b, "chunked") else { throw .unsupportedTransferCoding }
                        out.chunked = true
                    }
                    s = e + 1
                }
            case .contentLength:
                // One field, one number: repeated fields are refused even when equal.
                guard out.contentLength == nil, let n = Self.contentLength(p, valueStart, valueEnd) else {
                    throw .badContentLength
                }
                out.contentLength = n
                // A 204 must not carry one (RFC 9110 §8.6), and nghttp2
                // clients reset a 204 whose length is not 0.
                if out.status == 204 { forward = false }
            case .hopByHop, .requestId:
                forward = false
            case .other:
                break
            }
            fields.append(
                UpstreamResponseHead.Field(
                    nameStart: nameStart, nameLength: nameLength, valueStart: valueStart,
                    valueLength: valueEnd - valueStart, forward: forward))
        }
        guard i < count else { throw .malformedField }
        _ = try Self.lineEnd(p, i, error: .malformedField)
        // An HTTP/1.0 message with Transfer-Encoding: close after it (RFC 9112 §6.1).
        if out.transferEncoded, minor == UInt8(ascii: "0") { out.keepAlive = false }
        return out
    }

    /// Index after the CRLF (or bare LF) at `i`; a lone CR is refused.
    @inline(__always)
    private static func lineEnd(
        _ p: UnsafeMutableBufferPointer<UInt8>, _ i: Int, error: UpstreamResponseError
    ) throws(UpstreamResponseError) -> Int {
        if i < p.count, p[i] == UInt8(ascii: "\n") { return i + 1 }
        if i + 1 < p.count, p[i] == UInt8(ascii: "\r"), p[i + 1] == UInt8(ascii: "\n") { return i + 2 }
        throw error
    }

    /// `p[a..<b]` without leading and trailing spaces and tabs.
    @inline(__always)
    private static func trimmed(_ p: UnsafeMutableBufferPointer<UInt8>, _ a: Int, _ b: Int) -> (Int, Int) {
        var a = a
        var b = b
        while a < b, p[a] == UInt8(ascii: " ") || p[a] == 0x09 { a += 1 }
        while b > a, p[b - 1] == UInt8(ascii: " ") || p[b - 1] == 0x09 { b -= 1 }
        return (a, b)
    }

    /// The first bytes of `p` are exactly `literal`'s (the caller checked the length).
    @inline(__always)
    private static func startsExactly(_ p: UnsafeMutableBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let lit = literal.utf8Start
        for k in 0..<literal.utf8CodeUnitCount where p[k] != lit[k] { return false }
        return true
    }

    /// Case-insensitive: `p[a..<b]` equals the lower-case `literal`.
    @inline(__always)
    private static func equals(_ p: UnsafeMutableBufferPointer<UInt8>, _ a: Int, _ b: Int, _ literal: StaticString) -> Bool {
        guard b - a == literal.utf8CodeUnitCount else { return false }
        let lit = literal.utf8Start
        for k in 0..<(b - a) where ASCII.lower(p[a + k]) != lit[k] { return false }
        return true
    }

    /// `ASCII.contentLength` of `p[a..<b]`: 1 to 18 digits, nothing else.
    private static func contentLength(_ p: UnsafeMutableBufferPointer<UInt8>, _ a: Int, _ b: Int) -> Int? {
        guard b > a, b - a <= 18 else { return nil }
        var n = 0
        for k in a..<b {
            guard let d = ASCII.digit(p[k]) else { return nil }
            n = n * 10 + d
        }
        return n
    }

    /// Fields a `Connection` field names are hop-by-hop too (RFC 9110 §7.6.1).
    private static func dropListed(_ fields: inout [UpstreamResponseHead.Field], _ bytes: [UInt8]) {
        var listed: [ArraySlice<UInt8>] = []
        for f in fields where bytes[f.nameStart..<f.nameStart + f.nameLength].elementsEqual("connection".utf8) {
            for token in bytes[f.valueStart..<f.valueStart + f.valueLength].split(separator: UInt8(ascii: ",")) {
                let t = ASCII.trimmed(token)
                if !t.isEmpty { listed.append(t) }
            }
        }
        for i in fields.indices where fields[i].forward {
            let name = bytes[fields[i].nameStart..<fields[i].nameStart + fields[i].nameLength]
            if listed.contains(where: { ASCII.equalsLowerBytes($0, name) }) { fields[i].forward = false }
        }
    }

    // MARK: chunked body

    /// Reads chunk framing bytes; true when the body ended (after the trailers).
    private mutating func chunkFraming(_ buffer: inout ByteBuffer) throws(UpstreamResponseError) -> Bool {
        while let b = buffer.readInteger(as: UInt8.self) {
            switch state {
            case .chunkSize(var size, var digits, var inExtension, var lineBytes, let sawCR):
                lineBytes += 1
                guard lineBytes <= Self.maxChunkLineBytes else { throw .malformedChunk }
                if sawCR {
                    guard b == UInt8(ascii: "\n") else { throw .malformedChunk }
                }
                if b == UInt8(ascii: "\n") {
                    guard digits > 0 else { throw .malformedChunk }
                    state = size == 0 ? .trailers(bytes: 0) : .chunkData(size)
                    lineEnd = 1
                    return false
                }
                if b == UInt8(ascii: "\r") {
                    state = .chunkSize(size: size, digits: digits, inExtension: inExtension, lineBytes: lineBytes, sawCR: true)
                    continue
                }
                if inExtension {
                    // chunk-ext: read past, but no control bytes.
                    guard b >= 0x20 || b == 0x09 else { throw .malformedChunk }
                } else if let v = ASCII.hexDigit(b) {
                    // 15 hex digits fit an Int; a longer size is an attack or garbage.
                    guard digits < 15 else { throw .malformedChunk }
                    size = size << 4 | v
                    digits += 1
                } else if b == UInt8(ascii: ";") || b == UInt8(ascii: " ") || b == 0x09 {
                    guard digits > 0 else { throw .malformedChunk }
                    inExtension = true
                } else {
                    throw .malformedChunk
                }
                state = .chunkSize(size: size, digits: digits, inExtension: inExtension, lineBytes: lineBytes, sawCR: false)
            case .chunkDataEnd(let sawCR):
                if b == UInt8(ascii: "\r"), !sawCR {
                    state = .chunkDataEnd(sawCR: true)
                } else if b == UInt8(ascii: "\n") {
                    state = .chunkSize(size: 0, digits: 0, inExtension: false, lineBytes: 0, sawCR: false)
                    return false
                } else {
                    throw .malformedChunk
                }
            case .trailers(let count):
                guard count < Self.maxTrailerBytes else { throw .trailersTooLarge }
                // Trailer lines are read and dropped; an empty line ends them.
                // lineEnd: 0 in a line, 1 at a line start, 2 at a line start after
                // CR, 3 after a CR inside a line (a LF must follow).
                switch (b, lineEnd) {
                case (UInt8(ascii: "\n"), 0), (UInt8(ascii: "\n"), 3):
                    lineEnd = 1
                case (UInt8(ascii: "\n"), _):
                    lineEnd = 0
                    state = .idle
                    return true
                case (UInt8(ascii: "\r"), 0): lineEnd = 3
                case (UInt8(ascii: "\r"), 1): lineEnd = 2
                case (UInt8(ascii: "\r"), _): throw .malformedChunk
                default:
                    guard lineEnd < 2, b >= 0x20 || b == 0x09, b != 0x7F else { throw .malformedChunk }
                    lineEnd = 0
                }
                state = .trailers(bytes: count + 1)
            default:
                return false
            }
        }
        return false
    }
}

/// The field names a proxy must not forward, by their lower-case bytes.
enum HopByHop {
    enum Kind {
        case connection, transferEncoding, contentLength, requestId, hopByHop, other
    }

    static func classify(_ name: ArraySlice<UInt8>) -> Kind {
        name.withUnsafeBufferPointer { classify($0) }
    }

    /// By length first, then one comparison of bytes (names are lower case here).
    static func classify(_ name: UnsafeBufferPointer<UInt8>) -> Kind {
        switch name.count {
        case 2: return named(name, "te") ? .hopByHop : .other
        case 7: return named(name, "trailer") || named(name, "upgrade") ? .hopByHop : .other
        case 10:
            if named(name, "connection") { return .connection }
            return named(name, "keep-alive") ? .hopByHop : .other
        case 12:
            if named(name, "x-request-id") { return .requestId }
            return proxyPrefixed(name) ? .hopByHop : .other
        case 14: return named(name, "content-length") ? .contentLength : (proxyPrefixed(name) ? .hopByHop : .other)
        case 17:
            if named(name, "transfer-encoding") { return .transferEncoding }
            return proxyPrefixed(name) ? .hopByHop : .other
        default: return proxyPrefixed(name) ? .hopByHop : .other
        }
    }

    @inline(__always)
    private static func named(_ name: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        name.count == literal.utf8CodeUnitCount && prefix(name, literal)
    }

    @inline(__always)
    private static func proxyPrefixed(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        name.count >= 6 && prefix(name, "proxy-")
    }

    /// The first bytes of `name` are `literal`'s (the caller checked the length).
    @inline(__always)
    private static func prefix(_ name: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let lit = literal.utf8Start
        for k in 0..<literal.utf8CodeUnitCount where name[k] != lit[k] { return false }
        return true
    }
}
