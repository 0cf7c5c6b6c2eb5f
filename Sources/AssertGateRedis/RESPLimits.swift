/// Upper bounds on one reply, enforced by `RESPLimitScanner` on the raw bytes
/// before hiredis sees them: hiredis 0.14 buffers any bulk length and callocs
/// any array count it is told, so an evil or broken server could otherwise
/// make the gateway allocate without bound.
public struct RESPLimits: Sendable, Equatable {
    /// Longest bulk string payload.
    public var maxBulkLength: Int
    /// Largest element count of one array header.
    public var maxArrayCount: Int
    /// Deepest array nesting (hiredis itself stops at 7).
    public var maxDepth: Int
    /// Most bytes one top-level reply may span on the wire.
    public var maxReplyBytes: Int
    /// Most array elements declared in one top-level reply, all levels summed.
    public var maxTotalElements: Int
    /// Longest header or simple line (`+`, `-`, `:`, `$`, `*`) without CRLF.
    public var maxLineLength: Int

    /// The defaults fit the largest replies the gateway asks for: `CLUSTER
    /// SLOTS` of a cluster resharded into many slot ranges (up to one array
    /// per hash slot, 16,384, each with its nodes), a DeviceCheck claim of
    /// `updateBatch` (≤ 1000) updates at three elements each. Sets of any
    /// size are read with `SSCAN`. A reply over a limit closes the connection
    /// and fails every command on it, so a limit a real reply can reach is a
    /// bug, not a defence; memory stays bounded by `maxReplyBytes` and the
    /// elements' count (hiredis allocates a pointer per declared element).
    public init(
        maxBulkLength: Int = 1 << 20, maxArrayCount: Int = 16_384, maxDepth: Int = 4,
        maxReplyBytes: Int = 8 << 20, maxTotalElements: Int = 1 << 19, maxLineLength: Int = 4096
    ) {
        self.maxBulkLength = maxBulkLength
        self.maxArrayCount = maxArrayCount
        self.maxDepth = maxDepth
        self.maxReplyBytes = maxReplyBytes
        self.maxTotalElements = maxTotalElements
        self.maxLineLength = maxLineLength
    }

    public static let `default` = RESPLimits()
}

/// Why a reply stream was refused.
public enum RESPDecodingError: Error, Equatable, Sendable {
    case bulkTooLong(Int)
    case arrayTooLong(Int)
    case tooDeep
    case replyTooLarge
    case tooManyElements
    case lineTooLong
    case invalidTypeByte(UInt8)
    case invalidLength
    case missingCRLF
    /// hiredis reported a protocol error (its message).
    case hiredis(String)
    case readerCreationFailed
}
