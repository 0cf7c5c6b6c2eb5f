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
        var writer = RESPCommandWriter(arrayCount: arguments.count, capacity: size, allocator: allocator)
        for argument in arguments {
            switch argument {
            case .string(let s): writer.bulk(s)
            case .bytes(let b): writer.bulk(b)
            case .integer(let i): writer.bulk(i)
            }
        }
        self.bytes = writer.buffer
    }

    public init(_ arguments: RESPArgument...) {
        self.init(arguments)
    }

    /// Hot paths build commands with `RESPCommandWriter` to skip the argument array.
    public init(writer: RESPCommandWriter) {
        self.bytes = writer.buffer
    }
}

/// Writes one RESP2 command (array of bulk strings) straight into a buffer.
public struct RESPCommandWriter {
    private(set) var buffer: ByteBuffer

    init(arrayCount: Int, capacity: Int, allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        buffer = allocator.buffer(capacity: capacity)
        buffer.writeInteger(UInt8(ascii: "*"))
        Self.writeLine(Int64(arrayCount), into: &buffer)
    }

    /// Continues a command whose constant head (array header and leading
    /// arguments, from `RESPCommandWriter.encodedHead`) is already encoded.
    public init(head: [UInt8], capacity: Int, allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        buffer = allocator.buffer(capacity: capacity)
        buffer.writeBytes(head)
    }

    /// `*<arrayCount>` and `arguments` as bulk strings, for `init(head:)`.
    public static func encodedHead(arrayCount: Int, _ arguments: [String]) -> [UInt8] {
        var writer = RESPCommandWriter(arrayCount: arrayCount, capacity: 128)
        for argument in arguments { writer.bulk(argument) }
        return Array(writer.buffer.readableBytesView)
    }

    public mutating func bulk(_ s: String) {
        header(s.utf8.count)
        buffer.writeString(s)
        crlf()
    }

    public mutating func bulk(_ s: StaticString) {
        header(s.utf8CodeUnitCount)
        buffer.writeStaticString(s)
        crlf()
    }

    public mutating func bulk(_ b: [UInt8]) {
        header(b.count)
        buffer.writeBytes(b)
        crlf()
    }

    public mutating func bulk(_ i: Int64) {
        header(Self.digitCount(i))
        Self.writeDigits(i, into: &buffer)
        crlf()
    }

    /// `prefix ‖ b64url(tagBytes) ‖ suffix ‖ tail` as one bulk string: Redis
    /// key names built without an intermediate String.
    public mutating func bulkKey(prefix: StaticString, tagBytes: [UInt8], suffix: StaticString, tail: String = "") {
        let encoded = RedisBase64URL.encodedCount(tagBytes.count)
        header(prefix.utf8CodeUnitCount + encoded + suffix.utf8CodeUnitCount + tail.utf8.count)
        buffer.writeStaticString(prefix)
        RedisBase64URL.encode(tagBytes, into: &buffer)
        buffer.writeStaticString(suffix)
        buffer.writeString(tail)
        crlf()
    }

    private mutating func header(_ length: Int) {
        buffer.writeInteger(UInt8(ascii: "$"))
        Self.writeLine(Int64(length), into: &buffer)
    }

    private mutating func crlf() {
        buffer.writeInteger(UInt16(0x0D0A))
    }

    /// `<digits>\r\n`
    private static func writeLine(_ value: Int64, into buffer: inout ByteBuffer) {
        writeDigits(value, into: &buffer)
        buffer.writeInteger(UInt16(0x0D0A))
    }

    static func digitCount(_ value: Int64) -> Int {
        var n = value < 0 ? 2 : 1
        var m = value.magnitude
        while m >= 10 {
            m /= 10
            n += 1
        }
        return n
    }

    static func writeDigits(_ value: Int64, into buffer: inout ByteBuffer) {
        let count = digitCount(value)
        let magnitude = value.magnitude
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { out in
            var m = magnitude
            var i = count - 1
            repeat {
                out[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: m % 10)
                m /= 10
                i -= 1
            } while m > 0
            if value < 0 { out[0] = UInt8(ascii: "-") }
            return count
        }
    }
}
