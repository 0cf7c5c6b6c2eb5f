/// A bounded decoder for definite-length CBOR (RFC 8949) as App Attest uses it.
///
/// Rejects indefinite lengths, duplicate map keys, tags, floats, `undefined`,
/// reserved encodings and (for `decode`) trailing bytes. Every length is
/// checked against the remaining input and the limits before allocating, so
/// no input can make it trap or allocate more than the input size allows.
public struct CBORDecoder: Sendable {
    public let limits: CBORLimits

    public init(limits: CBORLimits) {
        self.limits = limits
    }

    /// Decodes exactly one item spanning all of `bytes`.
    public func decode(_ bytes: [UInt8]) throws(CBORError) -> CBORValue {
        try decode(bytes, range: 0..<bytes.count)
    }

    /// Decodes exactly one item spanning all of `bytes[range]`.
    public func decode(_ bytes: [UInt8], range: Range<Int>) throws(CBORError) -> CBORValue {
        let (value, end) = try decodePrefix(bytes, range: range)
        if end != range.upperBound {
            throw .trailingBytes(offset: end, count: range.upperBound - end)
        }
        return value
    }

    /// Decodes the first item of `bytes[range]` and returns it with the index
    /// just past it (authenticator data holds a COSE key followed by more data).
    public func decodePrefix(_ bytes: [UInt8], range: Range<Int>) throws(CBORError) -> (CBORValue, Int) {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else {
            throw .truncated(offset: range.lowerBound)
        }
        if range.count > limits.maxInputSize {
            throw .inputTooLarge(size: range.count, limit: limits.maxInputSize)
        }
        var state = State(bytes: bytes, position: range.lowerBound, end: range.upperBound, limits: limits)
        let value = try state.item(depth: 1)
        return (value, state.position)
    }

    private struct State {
        let bytes: [UInt8]
        var position: Int
        let end: Int
        let limits: CBORLimits
        var items = 0

        init(bytes: [UInt8], position: Int, end: Int, limits: CBORLimits) {
            self.bytes = bytes
            self.position = position
            self.end = end
            self.limits = limits
        }

        var remaining: Int { end - position }

        mutating func byte() throws(CBORError) -> UInt8 {
            guard position < end else { throw .truncated(offset: position) }
            defer { position += 1 }
            return bytes[position]
        }

        /// Reads the argument of an initial byte (RFC 8949 §3).
        mutating func argument(_ info: UInt8, start: Int) throws(CBORError) -> UInt64 {
            switch info {
            case 0..<24: return UInt64(info)
            case 24, 25, 26, 27:
                let width = 1 << Int(info - 24)
                guard remaining >= width else { throw .truncated(offset: end) }
                var value: UInt64 = 0
                for _ in 0..<width { value = value << 8 | UInt64(bytes[position]); position += 1 }
                return value
            case 31: throw .indefiniteLength(offset: start)
            default: throw .reservedAdditionalInfo(offset: start, value: info)
            }
        }

        mutating func item(depth: Int) throws(CBORError) -> CBORValue {
            let start = position
            items += 1
            if items > limits.maxItems { throw .tooManyItems(offset: start, limit: limits.maxItems) }
            let initial = try byte()
            let major = initial >> 5
            let info = initial & 0x1f
            if major == 7 { return try simple(info, start: start) }
            let argument = try argument(info, start: start)
            switch major {
            case 0: return .unsigned(argument)
            case 1: return .negative(argument)
            case 2: return .bytes(try string(length: argument, start: start))
            case 3:
                let raw = try string(length: argument, start: start)
                guard let text = String(validating: raw, as: UTF8.self) else {
                    throw .invalidUTF8(offset: start)
                }
                return .text(text)
            case 4:
                let count = try containerCount(argument, perElement: 1, start: start, depth: depth)
                var elements: [CBORValue] = []
                elements.reserveCapacity(count)
                for _ in 0..<count { elements.append(try item(depth: depth + 1)) }
                return .array(elements)
            case 5:
                let count = try containerCount(argument, perElement: 2, start: start, depth: depth)
                var entries: [CBORMapEntry] = []
                entries.reserveCapacity(count)
                var seen = Set<CBORValue>()
                for _ in 0..<count {
                    let keyStart = position
                    let key = try item(depth: depth + 1)
                    if !seen.insert(key).inserted { throw .duplicateMapKey(offset: keyStart) }
                    let value = try item(depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: value))
                }
                return .map(entries)
            default:
                // Major type 6 (tag) is the only one left.
                throw .unsupportedItem(offset: start, what: "tag")
            }
        }

        mutating func simple(_ info: UInt8, start: Int) throws(CBORError) -> CBORValue {
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 23: throw .unsupportedItem(offset: start, what: "undefined")
            case 24: throw .unsupportedItem(offset: start, what: "simple value")
            case 25, 26, 27: throw .unsupportedItem(offset: start, what: "float")
            case 31: throw .indefiniteLength(offset: start)
            case 28, 29, 30: throw .reservedAdditionalInfo(offset: start, value: info)
            default: throw .unsupportedItem(offset: start, what: "simple value")
            }
        }

        mutating func string(length: UInt64, start: Int) throws(CBORError) -> [UInt8] {
            if length > UInt64(limits.maxStringLength) {
                throw .stringTooLong(offset: start, length: length, limit: limits.maxStringLength)
            }
            let count = Int(length)
            guard count <= remaining else { throw .truncated(offset: end) }
            defer { position += count }
            return Array(bytes[position..<position + count])
        }

        /// Checks a container's declared count against the limits and against
        /// what the remaining input could possibly hold (≥ 1 byte per item).
        func containerCount(_ argument: UInt64, perElement: Int, start: Int, depth: Int) throws(CBORError) -> Int {
            if depth > limits.maxDepth { throw .depthExceeded(offset: start, limit: limits.maxDepth) }
            if argument > UInt64(limits.maxContainerCount) {
                throw .containerTooLarge(offset: start, count: argument, limit: limits.maxContainerCount)
            }
            let count = Int(argument)
            if count * perElement > remaining { throw .truncated(offset: end) }
            return count
        }
    }
}
