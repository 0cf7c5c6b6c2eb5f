/// Header blocks by hand (RFC 7541): static-table entries and literals
/// without indexing, so a test shows every byte it sends.
enum HPACKBytes {
    static let methodGET: [UInt8] = [0x82]
    static let methodPOST: [UInt8] = [0x83]
    static let pathRoot: [UInt8] = [0x84]
    static let schemeHTTP: [UInt8] = [0x86]

    /// Literal without indexing, name from the static table (4-bit prefix integer).
    static func literal(index: UInt8, _ value: String) -> [UInt8] {
        precondition(index < 15 + 127)
        return (index < 15 ? [index] : [0x0f, index - 15]) + string(value)
    }

    /// Literal without indexing, new name.
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x00] + string(name) + string(value)
    }

    /// A literal field added to the dynamic table (RFC 7541 §6.2.1), any length.
    static func indexedLiteral(_ name: String, _ value: String) -> [UInt8] {
        [0x40] + long(Array(name.utf8)) + long(Array(value.utf8))
    }

    /// A string literal without Huffman coding, its length as a 7-bit-prefix integer.
    private static func long(_ b: [UInt8]) -> [UInt8] {
        guard b.count >= 127 else { return [UInt8(b.count)] + b }
        var out: [UInt8] = [0x7F]
        var n = b.count - 127
        while n >= 128 {
            out.append(UInt8(n & 0x7F) | 0x80)
            n >>= 7
        }
        out.append(UInt8(n))
        return out + b
    }

    /// A string literal without Huffman coding (lengths under 127).
    private static func string(_ s: String) -> [UInt8] {
        let b = Array(s.utf8)
        precondition(b.count < 127)
        return [UInt8(b.count)] + b
    }
}
