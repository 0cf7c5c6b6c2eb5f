import NIOCore

/// One argument of a Redis command.
public enum RESPArgument: Sendable, Equatable, ExpressibleByStringLiteral {
    case string(String)
    case bytes([UInt8])
    case integer(Int64)

    public init(stringLiteral value: String) {
        self = .string(value)
    }
}

/// A command already encoded as a RESP2 array of bulk strings. Encoding
/// happens once, in Swift, on the caller's side; the bytes are reused as-is
/// if the command must be retried (NOSCRIPT).
public struct RESPCommand: Sendable {
    public private(set) var bytes: ByteBuffer

    public init(_ arguments: [RESPArgument], allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        var size = 16
        for argument in arguments {
            switch argument {
            case .string(let s): size += s.utf8.count + 16
            case .bytes(let b): size += b.count + 16
            case .integer: size += 36
            }
        }
        var buffer = allocator.buffer(capacity: size)
        buffer.writeInteger(UInt8(ascii: "*"))
        Self.writeDecimal(Int64(arguments.count), into: &buffer)
        for argument in arguments {
            switch argument {
            case .string(let s):
                Self.writeBulkHeader(s.utf8.count, into: &buffer)
                buffer.writeString(s)
            case .bytes(let b):
                Self.writeBulkHeader(b.count, into: &buffer)
                buffer.writeBytes(b)
            case .integer(let i):
                var digits = ByteBuffer()
                Self.writeDigits(i, into: &digits)
                Self.writeBulkHeader(digits.readableBytes, into: &buffer)
                buffer.writeImmutableBuffer(digits)
            }
            buffer.writeInteger(UInt8(ascii: "\r"))
            buffer.writeInteger(UInt8(ascii: "\n"))
        }
        self.bytes = buffer
    }

    public init(_ arguments: RESPArgument...) {
        self.init(arguments)
    }

    private static func writeBulkHeader(_ length: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(ascii: "$"))
        writeDecimal(Int64(length), into: &buffer)
    }

    /// `<digits>\r\n`
    private static func writeDecimal(_ value: Int64, into buffer: inout ByteBuffer) {
        writeDigits(value, into: &buffer)
        buffer.writeInteger(UInt8(ascii: "\r"))
        buffer.writeInteger(UInt8(ascii: "\n"))
    }

    private static func writeDigits(_ value: Int64, into buffer: inout ByteBuffer) {
        if value < 0 { buffer.writeInteger(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        // 20 digits hold UInt64.max.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { tmp in
            var n = 0
            repeat {
                tmp[19 - n] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                n += 1
            } while magnitude > 0
            buffer.writeBytes(UnsafeBufferPointer(rebasing: tmp[(20 - n)...]))
        }
    }
}
