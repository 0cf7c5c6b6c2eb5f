/// Base64 as protocol.md defines it for the wire: decoders accept both the
/// standard and the URL-safe alphabet, with or without padding, and reject
/// anything else (whitespace, mixed junk, bad padding, non-canonical tails).
public enum Base64 {
    public enum DecodeError: Error, Sendable, Equatable {
        case tooLong
        case invalidCharacter
        case invalidLength
        case nonCanonical
    }

    private static let standard: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let url: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The 6-bit value of one character of either alphabet.
    @inline(__always)
    public static func value(of c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c &- UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c &- UInt8(ascii: "a") &+ 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c &- UInt8(ascii: "0") &+ 52
        case UInt8(ascii: "+"), UInt8(ascii: "-"): return 62
        case UInt8(ascii: "/"), UInt8(ascii: "_"): return 63
        default: return nil
        }
    }

    public static func decode(_ s: some StringProtocol, maxDecodedBytes: Int) throws(DecodeError) -> [UInt8] {
        var utf8 = Array(s.utf8)
        return try decode(bytes: &utf8, maxDecodedBytes: maxDecodedBytes)
    }

    public static func decode(bytes input: inout [UInt8], maxDecodedBytes: Int) throws(DecodeError) -> [UInt8] {
        // Strip up to two '=' of padding; padded input must be a multiple of 4.
        var end = input.count
        var padding = 0
        while end > 0, input[end - 1] == UInt8(ascii: "="), padding < 2 {
            end -= 1
            padding += 1
        }
        if padding > 0, input.count % 4 != 0 { throw .invalidLength }
        if end % 4 == 1 { throw .invalidLength }
        let outCount = end / 4 * 3 + (end % 4 == 0 ? 0 : end % 4 - 1)
        guard outCount <= maxDecodedBytes else { throw .tooLong }
        var out = [UInt8]()
        out.reserveCapacity(outCount)
        var acc: UInt32 = 0
        var bits = 0
        for i in 0..<end {
            guard let v = value(of: input[i]) else { throw .invalidCharacter }
            acc = (acc << 6) | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, or two encodings would map to one value.
        if bits > 0, acc & ((1 << UInt32(bits)) - 1) != 0 { throw .nonCanonical }
        return out
    }

    public static func encode(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: standard, pad: true) }
    public static func encodeURL(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: url, pad: false) }

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            var n = UInt32(bytes[i]) << 16
            if rest == 2 { n |= UInt32(bytes[i + 1]) << 8 }
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if rest == 2 { out.append(alphabet[Int(n >> 6 & 63)]) }
            if pad { out.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 3 - rest)) }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
