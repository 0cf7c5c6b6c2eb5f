/// Strict base64 decoding that accepts the standard and the URL-safe
/// alphabet (not mixed), with or without `=` padding. Anything else —
/// whitespace, wrong padding, non-zero pad bits, over-long input — is rejected.
public enum Base64 {
    public enum DecodeError: Error, Sendable, Hashable, CustomStringConvertible {
        case tooLong(limit: Int)
        case invalidCharacter(offset: Int)
        case mixedAlphabets
        case invalidPadding
        case invalidLength
        case nonZeroPadBits

        public var description: String {
            switch self {
            case .tooLong(let limit): return "base64 longer than \(limit) characters"
            case .invalidCharacter(let offset): return "invalid base64 character at offset \(offset)"
            case .mixedAlphabets: return "base64 mixes the standard and URL-safe alphabets"
            case .invalidPadding: return "invalid base64 padding"
            case .invalidLength: return "invalid base64 length"
            case .nonZeroPadBits: return "base64 has non-zero pad bits"
            }
        }
    }

    public static func decode(_ text: String, maxLength: Int = 128 * 1024) throws(DecodeError) -> [UInt8] {
        try decode(Array(text.utf8), maxLength: maxLength)
    }

    public static func decode(_ input: [UInt8], maxLength: Int = 128 * 1024) throws(DecodeError) -> [UInt8] {
        guard input.count <= maxLength else { throw .tooLong(limit: maxLength) }
        var body = input[...]
        var padding = 0
        while let last = body.last, last == UInt8(ascii: "=") {
            padding += 1
            body = body.dropLast()
        }
        if padding > 0 && (padding > 2 || input.count % 4 != 0) { throw .invalidPadding }
        if body.count % 4 == 1 { throw .invalidLength }
        if padding > 0 && (body.count + padding) % 4 != 0 { throw .invalidPadding }

        var sawStandard = false
        var sawURL = false
        var output: [UInt8] = []
        output.reserveCapacity(body.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for (offset, char) in body.enumerated() {
            let value: UInt8
            switch char {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = char - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = char - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = char - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): value = 62; sawStandard = true
            case UInt8(ascii: "/"): value = 63; sawStandard = true
            case UInt8(ascii: "-"): value = 62; sawURL = true
            case UInt8(ascii: "_"): value = 63; sawURL = true
            default: throw .invalidCharacter(offset: offset)
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        if sawStandard && sawURL { throw .mixedAlphabets }
        if accumulator != 0 { throw .nonZeroPadBits }
        return output
    }

    /// The longest text that can decode to at most `bytes` bytes, for `maxLength`.
    public static func encodedLength(ofAtMost bytes: Int) -> Int { (bytes + 2) / 3 * 4 }

    /// Standard alphabet with padding.
    public static func encode(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: standardAlphabet, pad: true) }

    /// URL-safe alphabet without padding (keyIds and challenges on the wire).
    public static func encodeURL(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: urlAlphabet, pad: false) }

    private static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let triple = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(triple >> 18 & 63)])
            out.append(alphabet[Int(triple >> 12 & 63)])
            if index + 1 < bytes.count {
                out.append(alphabet[Int(triple >> 6 & 63)])
            } else if pad {
                out.append(UInt8(ascii: "="))
            }
            if index + 2 < bytes.count {
                out.append(alphabet[Int(triple & 63)])
            } else if pad {
                out.append(UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
