/// An incremental structural pre-scan of RESP2 reply bytes. It keeps just
/// enough state (the current header line, the bulk bytes left to skip, the
/// open arrays' remaining counts) to reject a reply that would exceed
/// `RESPLimits` *before* the bytes are handed to hiredis, which allocates as
/// soon as it reads a header. Bulk payloads are skipped, not inspected, so the
/// cost is one pass over header bytes. Line ends are `\r\n` exactly, like hiredis.
struct RESPLimitScanner {
    private enum Phase {
        case type
        case simpleLine(sawCR: Bool)
        case length(isArray: Bool, negative: Bool, value: Int, digits: Int, sawCR: Bool)
        case bulkBody(remaining: Int)
    }

    let limits: RESPLimits
    private var phase: Phase = .type
    private var lineLength = 0
    /// Remaining element counts of the open arrays, outermost first.
    private var open: [Int] = []
    private var replyBytes = 0
    private var replyElements = 0

    init(limits: RESPLimits) {
        self.limits = limits
        open.reserveCapacity(limits.maxDepth)
    }

    /// Scans `bytes`, which continue the stream where the previous call ended.
    mutating func scan(_ bytes: UnsafeRawBufferPointer) throws(RESPDecodingError) {
        var i = 0
        let n = bytes.count
        while i < n {
            if case .bulkBody(let remaining) = phase {
                // Skip payload in one step; it cannot change the structure.
                let take = min(remaining, n - i)
                i += take
                try count(take)
                if take == remaining {
                    completeElement()
                } else {
                    phase = .bulkBody(remaining: remaining - take)
                }
                continue
            }
            if case .type = phase, let next = try fastLine(bytes, at: i) {
                i = next
                continue
            }
            let byte = bytes[i]
            i += 1
            try count(1)
            try step(byte)
        }
    }

    /// A whole header or simple line that lies in `bytes` from `start` and is
    /// well within every limit, handled in one pass (the usual case: small
    /// replies such as the commit script's). Answers the index after its CRLF,
    /// or nil to let the byte-at-a-time path take the line from its start, so
    /// anything unusual (split across reads, a sign, a limit reached) keeps
    /// exactly that path's checks and errors.
    private mutating func fastLine(_ bytes: UnsafeRawBufferPointer, at start: Int) throws(RESPDecodingError) -> Int? {
        let n = bytes.count
        let type = bytes[start]
        var j = start + 1
        switch type {
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"):
            while j + 1 < n, j - start <= limits.maxLineLength {
                if bytes[j] == UInt8(ascii: "\r") && bytes[j + 1] == UInt8(ascii: "\n") {
                    let end = j + 2
                    guard end - start - 1 <= limits.maxLineLength, replyBytes + end - start <= limits.maxReplyBytes
                    else { return nil }
                    try count(end - start)
                    completeElement()
                    return end
                }
                j += 1
            }
            return nil
        case UInt8(ascii: "$"), UInt8(ascii: "*"):
            let isArray = type == UInt8(ascii: "*")
            let limit = isArray ? limits.maxArrayCount : limits.maxBulkLength
            var value = 0
            while j < n, j - start <= 18, case let d = bytes[j], d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") {
                value = value * 10 + Int(d &- UInt8(ascii: "0"))
                j += 1
            }
            let digits = j - start - 1
            guard digits > 0, j + 1 < n, bytes[j] == UInt8(ascii: "\r"), bytes[j + 1] == UInt8(ascii: "\n"),
                value <= limit, digits + 2 <= limits.maxLineLength, replyBytes + j + 2 - start <= limits.maxReplyBytes
            else { return nil }
            try count(j + 2 - start)
            try finishLength(isArray: isArray, negative: false, value: value)
            return j + 2
        default:
            return nil
        }
    }

    private mutating func count(_ k: Int) throws(RESPDecodingError) {
        replyBytes += k
        if replyBytes > limits.maxReplyBytes { throw .replyTooLarge }
    }

    private mutating func step(_ byte: UInt8) throws(RESPDecodingError) {
        switch phase {
        case .type:
            lineLength = 0
            switch byte {
            case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"):
                phase = .simpleLine(sawCR: false)
            case UInt8(ascii: "$"):
                phase = .length(isArray: false, negative: false, value: 0, digits: 0, sawCR: false)
            case UInt8(ascii: "*"):
                phase = .length(isArray: true, negative: false, value: 0, digits: 0, sawCR: false)
            default:
                throw .invalidTypeByte(byte)
            }
        case .simpleLine(let sawCR):
            lineLength += 1
            if lineLength > limits.maxLineLength { throw .lineTooLong }
            if sawCR && byte == UInt8(ascii: "\n") {
                completeElement()
            } else {
                phase = .simpleLine(sawCR: byte == UInt8(ascii: "\r"))
            }
        case .length(let isArray, var negative, var value, var digits, let sawCR):
            lineLength += 1
            if lineLength > limits.maxLineLength { throw .lineTooLong }
            if sawCR {
                guard byte == UInt8(ascii: "\n") else { throw .missingCRLF }
                try finishLength(isArray: isArray, negative: negative, value: value)
                return
            }
            switch byte {
            case UInt8(ascii: "\r"):
                guard digits > 0 else { throw .invalidLength }
                phase = .length(isArray: isArray, negative: negative, value: value, digits: digits, sawCR: true)
                return
            case UInt8(ascii: "-") where digits == 0 && !negative:
                negative = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = value * 10 + Int(byte &- UInt8(ascii: "0"))
                digits += 1
                // Refuse as soon as the number is too big, before it can overflow.
                if negative {
                    if value > 1 { throw .invalidLength }
                } else if isArray {
                    if value > limits.maxArrayCount { throw .arrayTooLong(value) }
                } else if value > limits.maxBulkLength {
                    throw .bulkTooLong(value)
                }
            default:
                throw .invalidLength
            }
            phase = .length(isArray: isArray, negative: negative, value: value, digits: digits, sawCR: false)
        case .bulkBody:
            // Handled in `scan`.
            break
        }
    }

    private mutating func finishLength(isArray: Bool, negative: Bool, value: Int) throws(RESPDecodingError) {
        if negative {
            // Only -1 (null) is valid; -0 is not a length either.
            guard value == 1 else { throw .invalidLength }
            completeElement()
            return
        }
        if !isArray {
            phase = .bulkBody(remaining: value + 2)
            return
        }
        // An empty array is nesting too: hiredis builds it one level deeper.
        if open.count >= limits.maxDepth { throw .tooDeep }
        if value == 0 {
            completeElement()
            return
        }
        replyElements += value
        if replyElements > limits.maxTotalElements { throw .tooManyElements }
        open.append(value)
        phase = .type
    }

    /// One element (or a whole nested array) ended: pop finished arrays.
    private mutating func completeElement() {
        phase = .type
        while let last = open.indices.last {
            open[last] -= 1
            if open[last] > 0 { return }
            open.removeLast()
        }
        // A top-level reply is complete.
        replyBytes = 0
        replyElements = 0
    }
}
