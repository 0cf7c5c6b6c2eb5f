/// A decoded CBOR data item. Only the types App Attest objects use are
/// represented; tags, floats and `undefined` are rejected by the decoder.
public indirect enum CBORValue: Sendable, Hashable {
    case unsigned(UInt64)
    /// A negative integer stored as CBOR does: the value is `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    /// Entries in encoded order; keys are unique (the decoder rejects duplicates).
    case map([CBORMapEntry])
    case bool(Bool)
    case null

    /// The value as a signed integer when it fits in `Int64`.
    public var int64: Int64? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    public var textValue: String? {
        if case .text(let t) = self { return t }
        return nil
    }

    public var mapEntries: [CBORMapEntry]? {
        if case .map(let m) = self { return m }
        return nil
    }

    /// The value stored under `key` when this is a map.
    public subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first(where: { $0.key == key })?.value
    }

    public subscript(text key: String) -> CBORValue? { self[.text(key)] }
    public subscript(int key: Int64) -> CBORValue? {
        self[key >= 0 ? .unsigned(UInt64(key)) : .negative(UInt64(-1 - key))]
    }
}

public struct CBORMapEntry: Sendable, Hashable {
    public var key: CBORValue
    public var value: CBORValue

    public init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}
