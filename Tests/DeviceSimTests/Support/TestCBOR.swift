// An independent, minimal CBOR reader for the tests: written separately from
// DeviceSim's encoder so a shared misunderstanding cannot pass unnoticed.

enum TestCBORError: Error, Equatable {
    case truncated
    case indefiniteLength
    case duplicateKey
    case trailingBytes
    case unsupported(UInt8)
    case tooDeep
}

indirect enum TestCBOR: Equatable {
    case unsigned(UInt64)
    case negative(Int64)
    case bytes([UInt8])
    case text(String)
    case array([TestCBOR])
    case map([Entry])
    case simple(UInt8)

    struct Entry: Equatable {
        var key: TestCBOR
        var value: TestCBOR
    }

    subscript(_ key: String) -> TestCBOR? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }

    subscript(int key: Int64) -> TestCBOR? {
        guard case .map(let entries) = self else { return nil }
        let wanted: TestCBOR = key >= 0 ? .unsigned(UInt64(key)) : .negative(key)
        return entries.first { $0.key == wanted }?.value
    }

    var bytesValue: [UInt8]? { if case .bytes(let b) = self { return b } else { return nil } }
    var textValue: String? { if case .text(let t) = self { return t } else { return nil } }
    var intValue: Int64? {
        switch self {
        case .unsigned(let u): return Int64(exactly: u)
        case .negative(let n): return n
        default: return nil
        }
    }
    var arrayValue: [TestCBOR]? { if case .array(let a) = self { return a } else { return nil } }
    var mapEntries: [Entry]? { if case .map(let m) = self { return m } else { return nil } }
}

struct TestCBORReader {
    let bytes: [UInt8]
    var position = 0
    /// Strict: rejects indefinite lengths and duplicate map keys.
    var strict = true

    init(_ bytes: [UInt8], strict: Bool = true) {
        self.bytes = bytes
        self.strict = strict
    }

    /// Decodes exactly one item spanning all of `bytes`.
    static func decode(_ bytes: [UInt8], strict: Bool = true) throws -> TestCBOR {
        var reader = TestCBORReader(bytes, strict: strict)
        let item = try reader.read()
        guard reader.position == bytes.count else { throw TestCBORError.trailingBytes }
        return item
    }

    mutating func read(depth: Int = 0) throws -> TestCBOR {
        guard depth < 16 else { throw TestCBORError.tooDeep }
        let initial = try byte()
        let major = initial >> 5
        let info = initial & 0x1f
        if info == 31 {
            guard !strict else { throw TestCBORError.indefiniteLength }
            return try readIndefinite(major: major, depth: depth)
        }
        let argument = try readArgument(info)
        switch major {
        case 0: return .unsigned(argument)
        case 1: return .negative(-1 - Int64(argument))
        case 2: return .bytes(try take(argument))
        case 3: return .text(String(decoding: try take(argument), as: UTF8.self))
        case 4:
            var items: [TestCBOR] = []
            for _ in 0..<argument { items.append(try read(depth: depth + 1)) }
            return .array(items)
        case 5:
            var entries: [TestCBOR.Entry] = []
            for _ in 0..<argument {
                let key = try read(depth: depth + 1)
                if strict, entries.contains(where: { $0.key == key }) { throw TestCBORError.duplicateKey }
                entries.append(.init(key: key, value: try read(depth: depth + 1)))
            }
            return .map(entries)
        case 7: return .simple(UInt8(truncatingIfNeeded: argument))
        default: throw TestCBORError.unsupported(initial)
        }
    }

    private mutating func readIndefinite(major: UInt8, depth: Int) throws -> TestCBOR {
        guard major == 5 else { throw TestCBORError.unsupported(major) }
        var entries: [TestCBOR.Entry] = []
        while true {
            guard position < bytes.count else { throw TestCBORError.truncated }
            if bytes[position] == 0xff {
                position += 1
                return .map(entries)
            }
            let key = try read(depth: depth + 1)
            entries.append(.init(key: key, value: try read(depth: depth + 1)))
        }
    }

    private mutating func readArgument(_ info: UInt8) throws -> UInt64 {
        switch info {
        case 0..<24: return UInt64(info)
        case 24: return UInt64(try byte())
        case 25: return try bigEndian(2)
        case 26: return try bigEndian(4)
        case 27: return try bigEndian(8)
        default: throw TestCBORError.unsupported(info)
        }
    }

    private mutating func bigEndian(_ count: Int) throws -> UInt64 {
        try take(UInt64(count)).reduce(0) { $0 << 8 | UInt64($1) }
    }

    private mutating func byte() throws -> UInt8 {
        guard position < bytes.count else { throw TestCBORError.truncated }
        defer { position += 1 }
        return bytes[position]
    }

    private mutating func take(_ count: UInt64) throws -> [UInt8] {
        guard count <= UInt64(bytes.count - position) else { throw TestCBORError.truncated }
        let end = position + Int(count)
        defer { position = end }
        return Array(bytes[position..<end])
    }
}
