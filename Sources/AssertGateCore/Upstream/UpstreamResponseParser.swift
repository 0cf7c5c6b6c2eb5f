import NIOCore

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
    case switchingProtocols
    case malformedChunk
    case trailersTooLarge
    /// Bytes after a complete response, or before any request was sent.
    case unexpectedBytes
}

/// What the parser reports, in order: one head, body slices, one end.
enum UpstreamResponseEvent {
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
    /// Head bytes of earlier reads, while the head is incomplete.
    private var pendingHead: [UInt8] = []
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
        pendingHead.removeAll(keepingCapacity: true)
        lineEnd = 0
    }

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
                guard let head = try takeHead(&buffer) else { return .needMore }
                if let event = try startBody(head) { return event }
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

    /// The complete head block, or nil when more bytes are needed.
    private mutating func takeHead(_ buffer: inout ByteBuffer) throws(UpstreamResponseError) -> [UInt8]? {
        var state = lineEnd
        let end: Int? = buffer.withUnsafeReadableBytes { raw in
            for (i, b) in raw.enumerated() {
                switch (b, state) {
                case (UInt8(ascii: "\n"), 0): state = 1
                case (UInt8(ascii: "\n"), _): return i + 1
                case (UInt8(ascii: "\r"), 1): state = 2
                default: state = 0
                }
            }
            return nil
        }
        guard let end else {
            lineEnd = state
            guard pendingHead.count + buffer.readableBytes <= Self.maxHeadBytes else { throw .headTooLarge }
            buffer.withUnsafeReadableBytes { pendingHead.append(contentsOf: $0) }
            buffer.moveReaderIndex(to: buffer.writerIndex)
            return nil
        }
        guard pendingHead.count + end <= Self.maxHeadBytes else { throw .headTooLarge }
        var head = pendingHead
        pendingHead.removeAll(keepingCapacity: true)
        lineEnd = 0
        buffer.withUnsafeReadableBytes { head.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<end])) }
        buffer.moveReaderIndex(forwardBy: end)
        return head
    }

    /// The head event, or nil for an interim (1xx) head.
    private mutating func startBody(_ bytes: [UInt8]) throws(UpstreamResponseError) -> UpstreamResponseEvent? {
        var parsed = try Self.parseHead(bytes)
        if parsed.head.status < 200 {
            // 101 would hand the connection to another protocol; nothing here asked for one.
            if parsed.head.status == 101 { throw .switchingProtocols }
            return nil  // interim (100, 103): the final head follows
        }
        let bodyless = noBody || parsed.head.status == 204 || parsed.head.status == 304
        if parsed.transferEncoded, parsed.contentLength != nil { throw .conflictingFraming }
        if bodyless {
            state = .idle
            pendingEnd = true
        } else if parsed.transferEncoded {
            // A coding other than chunked last: only the close can end the body.
            state = parsed.chunked ? .chunkSize(size: 0, digits: 0, inExtension: false, lineBytes: 0, sawCR: false) : .untilClose
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
        let count = bytes.count
        // "HTTP/1.x SSS"
        guard count >= 12, bytes[0..<7].elementsEqual("HTTP/1.".utf8), bytes[8] == UInt8(ascii: " ") else {
            throw .malformedStatusLine
        }
        let minor = bytes[7]
        guard minor == UInt8(ascii: "0") || minor == UInt8(ascii: "1") else { throw .malformedStatusLine }
        var status = 0
        for i in 9..<12 {
            guard let d = ASCII.digit(bytes[i]) else { throw .malformedStatusLine }
            status = status * 10 + d
        }
        guard status >= 100 else { throw .malformedStatusLine }
        var i = 12
        // The reason phrase: anything but control bytes, up to the line end.
        if bytes[i] == UInt8(ascii: " ") {
            while i < count, bytes[i] != UInt8(ascii: "\r"), bytes[i] != UInt8(ascii: "\n") {
                guard bytes[i] >= 0x20 || bytes[i] == 0x09, bytes[i] != 0x7F else { throw .malformedStatusLine }
                i += 1
            }
        }
        i = try Self.lineEnd(bytes, i, error: .malformedStatusLine)

        var fields: [UpstreamResponseHead.Field] = []
        var keepAlive = minor == UInt8(ascii: "1")
        var contentLength: Int?
        var transferEncoded = false
        var chunked = false
        var listsOthers = false
        while i < count, bytes[i] != UInt8(ascii: "\r"), bytes[i] != UInt8(ascii: "\n") {
            guard fields.count < maxFields else { throw .tooManyFields }
            // name: a token, lower-cased in place, directly followed by ':'
            let nameStart = i
            while i < count, bytes[i] != UInt8(ascii: ":") {
                guard ASCII.isTokenByte(bytes[i]) else { throw .malformedField }
                bytes[i] = ASCII.lower(bytes[i])
                i += 1
            }
            guard i < count, i > nameStart else { throw .malformedField }
            let nameLength = i - nameStart
            i += 1
            while i < count, bytes[i] == UInt8(ascii: " ") || bytes[i] == 0x09 { i += 1 }
            let valueStart = i
            var valueEnd = i
            while i < count, bytes[i] != UInt8(ascii: "\r"), bytes[i] != UInt8(ascii: "\n") {
                let b = bytes[i]
                guard b >= 0x20 || b == 0x09, b != 0x7F else { throw .malformedField }
                i += 1
                if b != UInt8(ascii: " "), b != 0x09 { valueEnd = i }
            }
            i = try Self.lineEnd(bytes, i, error: .malformedField)
            // obs-fold (a continuation line) is refused, as RFC 9112 §5.2 allows.
            if i < count, bytes[i] == UInt8(ascii: " ") || bytes[i] == 0x09 { throw .malformedField }
            let name = bytes[nameStart..<nameStart + nameLength]
            let value = bytes[valueStart..<valueEnd]
            var forward = true
            switch HopByHop.classify(name) {
            case .connection:
                forward = false
                for token in value.split(separator: UInt8(ascii: ",")) {
                    let t = ASCII.trimmed(token)
                    if ASCII.equalsLower(t, "close") {
                        keepAlive = false
                    } else if ASCII.equalsLower(t, "keep-alive") {
                        if minor == UInt8(ascii: "0") { keepAlive = true }
                    } else if !t.isEmpty {
                        listsOthers = true
                    }
                }
            case .transferEncoding:
                forward = false
                transferEncoded = true
                // The last coding decides (RFC 9112 §6.3); a later field continues the list.
                let last = value.split(separator: UInt8(ascii: ",")).last.map(ASCII.trimmed)
                chunked = last.map { ASCII.equalsLower($0, "chunked") } ?? false
            case .contentLength:
                // One field, one number: repeated fields are refused even when equal.
                guard contentLength == nil, let n = ASCII.contentLength(value) else { throw .badContentLength }
                contentLength = n
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
        _ = try Self.lineEnd(bytes, i, error: .malformedField)
        // An HTTP/1.0 message with Transfer-Encoding: close after it (RFC 9112 §6.1).
        if transferEncoded, minor == UInt8(ascii: "0") { keepAlive = false }
        if listsOthers { Self.dropListed(&fields, bytes) }
        return ParsedHead(
            head: UpstreamResponseHead(status: status, bytes: bytes, fields: fields), keepAlive: keepAlive,
            contentLength: contentLength, transferEncoded: transferEncoded, chunked: chunked)
    }

    /// Index after the CRLF (or bare LF) at `i`; a lone CR is refused.
    private static func lineEnd(_ bytes: [UInt8], _ i: Int, error: UpstreamResponseError) throws(UpstreamResponseError) -> Int {
        if i < bytes.count, bytes[i] == UInt8(ascii: "\n") { return i + 1 }
        if i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\r"), bytes[i + 1] == UInt8(ascii: "\n") { return i + 2 }
        throw error
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
        switch name.count {
        case 2: return name.elementsEqual("te".utf8) ? .hopByHop : .other
        case 7: return name.elementsEqual("trailer".utf8) || name.elementsEqual("upgrade".utf8) ? .hopByHop : .other
        case 10:
            if name.elementsEqual("connection".utf8) { return .connection }
            return name.elementsEqual("keep-alive".utf8) ? .hopByHop : .other
        case 12:
            if name.elementsEqual("x-request-id".utf8) { return .requestId }
            return name.starts(with: "proxy-".utf8) ? .hopByHop : .other
        case 14: return name.elementsEqual("content-length".utf8) ? .contentLength : (name.starts(with: "proxy-".utf8) ? .hopByHop : .other)
        case 17:
            if name.elementsEqual("transfer-encoding".utf8) { return .transferEncoding }
            return name.starts(with: "proxy-".utf8) ? .hopByHop : .other
        default: return name.starts(with: "proxy-".utf8) ? .hopByHop : .other
        }
    }
}
