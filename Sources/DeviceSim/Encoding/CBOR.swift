/// The CBOR items DeviceSim writes. Maps keep insertion order (the encoder
/// does not canonicalise) so mutations can produce duplicate keys.
indirect enum CBOR {
    case unsigned(UInt64)
    /// A negative integer `value` (< 0).
    case negative(Int64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    case map([(CBOR, CBOR)])
    /// A map written with indefinite length (0xbf … 0xff), which real devices never send.
    case indefiniteMap([(CBOR, CBOR)])

    static func int(_ value: Int64) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(value)
    }

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        CBOREncoder.append(self, to: &out)
        return out
    }
}

/// Minimal definite-length CBOR encoder (RFC 8949 §3), shortest heads.
enum CBOREncoder {
    static func append(_ item: CBOR, to out: inout [UInt8]) {
        switch item {
        case .unsigned(let value):
            appendHead(major: 0, value, to: &out)
        case .negative(let value):
            // Major type 1 carries -1 - n.
            appendHead(major: 1, UInt64(-1 - value), to: &out)
        case .bytes(let bytes):
            appendHead(major: 2, UInt64(bytes.count), to: &out)
            out.append(contentsOf: bytes)
        case .text(let text):
            let utf8 = Array(text.utf8)
            appendHead(major: 3, UInt64(utf8.count), to: &out)
            out.append(contentsOf: utf8)
        case .array(let items):
            appendHead(major: 4, UInt64(items.count), to: &out)
            for element in items { append(element, to: &out) }
        case .map(let pairs):
            appendHead(major: 5, UInt64(pairs.count), to: &out)
            for (key, value) in pairs {
                append(key, to: &out)
                append(value, to: &out)
            }
        case .indefiniteMap(let pairs):
            out.append(0xbf)
            for (key, value) in pairs {
                append(key, to: &out)
                append(value, to: &out)
            }
            out.append(0xff)
        }
    }

    static func appendHead(major: UInt8, _ value: UInt64, to out: inout [UInt8]) {
        let type = major << 5
        switch value {
        case 0..<24:
            out.append(type | UInt8(value))
        case 24...0xff:
            out.append(contentsOf: [type | 24, UInt8(value)])
        case 0x100...0xffff:
            out.append(type | 25)
            appendBigEndian(value, byteCount: 2, to: &out)
        case 0x1_0000...0xffff_ffff:
            out.append(type | 26)
            appendBigEndian(value, byteCount: 4, to: &out)
        default:
            out.append(type | 27)
            appendBigEndian(value, byteCount: 8, to: &out)
        }
    }

    static func appendBigEndian(_ value: UInt64, byteCount: Int, to out: inout [UInt8]) {
        for shift in stride(from: (byteCount - 1) * 8, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
}
