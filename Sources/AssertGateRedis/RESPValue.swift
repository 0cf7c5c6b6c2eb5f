/// One RESP2 reply, converted out of hiredis' `redisReply` tree so no C memory
/// outlives the decoder call that produced it.
public enum RESPValue: Sendable, Equatable {
    /// `+OK`
    case status(String)
    /// `-ERR ...`
    case error(String)
    /// `:42`
    case integer(Int64)
    /// `$n` bulk string bytes.
    case bulk([UInt8])
    /// `$-1` or `*-1`
    case null
    /// `*n`
    case array([RESPValue])

    /// Bulk or status payload as UTF-8 text, nil for other kinds.
    public var string: String? {
        switch self {
        case .bulk(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let s): return s
        default: return nil
        }
    }

    /// Integer replies, and bulk strings holding a decimal integer (Lua turns
    /// numbers stored in hashes into bulk strings).
    public var int64: Int64? {
        switch self {
        case .integer(let i): return i
        case .bulk(let bytes): return Int64(String(decoding: bytes, as: UTF8.self))
        default: return nil
        }
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}
