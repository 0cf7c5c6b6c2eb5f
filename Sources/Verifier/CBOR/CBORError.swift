/// Why a CBOR input was rejected; `offset` is the byte position of the
/// offending item's initial byte (or of the end of input when truncated).
public enum CBORError: Error, Sendable, Hashable, CustomStringConvertible {
    case inputTooLarge(size: Int, limit: Int)
    case truncated(offset: Int)
    case trailingBytes(offset: Int, count: Int)
    case depthExceeded(offset: Int, limit: Int)
    case tooManyItems(offset: Int, limit: Int)
    case stringTooLong(offset: Int, length: UInt64, limit: Int)
    case containerTooLarge(offset: Int, count: UInt64, limit: Int)
    case indefiniteLength(offset: Int)
    case reservedAdditionalInfo(offset: Int, value: UInt8)
    case unsupportedItem(offset: Int, what: String)
    case invalidUTF8(offset: Int)
    case duplicateMapKey(offset: Int)

    public var description: String {
        switch self {
        case .inputTooLarge(let size, let limit):
            return "CBOR input of \(size) bytes exceeds the limit of \(limit)"
        case .truncated(let offset): return "CBOR truncated at offset \(offset)"
        case .trailingBytes(let offset, let count):
            return "\(count) trailing bytes after the CBOR item at offset \(offset)"
        case .depthExceeded(let offset, let limit):
            return "CBOR nesting deeper than \(limit) at offset \(offset)"
        case .tooManyItems(let offset, let limit):
            return "more than \(limit) CBOR items at offset \(offset)"
        case .stringTooLong(let offset, let length, let limit):
            return "CBOR string of \(length) bytes exceeds \(limit) at offset \(offset)"
        case .containerTooLarge(let offset, let count, let limit):
            return "CBOR container with \(count) elements exceeds \(limit) at offset \(offset)"
        case .indefiniteLength(let offset): return "indefinite-length CBOR item at offset \(offset)"
        case .reservedAdditionalInfo(let offset, let value):
            return "reserved CBOR additional information \(value) at offset \(offset)"
        case .unsupportedItem(let offset, let what): return "unsupported CBOR \(what) at offset \(offset)"
        case .invalidUTF8(let offset): return "CBOR text string at offset \(offset) is not UTF-8"
        case .duplicateMapKey(let offset): return "duplicate CBOR map key at offset \(offset)"
        }
    }
}
