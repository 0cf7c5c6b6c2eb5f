/// Minimal CBOR and DER writers for building synthetic test objects. They
/// live in the tests on purpose: the Verifier has no encoder to share a bug with.
indirect enum TestCBOR {
    case uint(UInt64)
    case neg(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([TestCBOR])
    case map([(TestCBOR, TestCBOR)])

    var encoded: [UInt8] {
        switch self {
        case .uint(let n): return Self.head(0, n)
        case .neg(let n): return Self.head(1, n)
        case .bytes(let b): return Self.head(2, UInt64(b.count)) + b
        case .text(let t): return Self.head(3, UInt64(t.utf8.count)) + Array(t.utf8)
        case .array(let a): return Self.head(4, UInt64(a.count)) + a.flatMap(\.encoded)
        case .map(let m): return Self.head(5, UInt64(m.count)) + m.flatMap { $0.0.encoded + $0.1.encoded }
        }
    }

    static func head(_ major: UInt8, _ n: UInt64) -> [UInt8] {
        let m = major << 5
        switch n {
        case 0..<24: return [m | UInt8(n)]
        case 24..<256: return [m | 24, UInt8(n)]
        case 256..<65536: return [m | 25, UInt8(n >> 8), UInt8(n & 0xff)]
        case 65536..<(1 << 32): return [m | 26] + (0..<4).reversed().map { UInt8(n >> (8 * UInt64($0)) & 0xff) }
        default: return [m | 27] + (0..<8).reversed().map { UInt8(n >> (8 * UInt64($0)) & 0xff) }
        }
    }

    /// COSE_Key for a 65-byte point.
    static func coseKey(_ point: [UInt8], crv: UInt64 = 1) -> TestCBOR {
        .map([
            (.uint(1), .uint(2)), (.uint(3), .neg(6)), (.neg(0), .uint(crv)),
            (.neg(1), .bytes(Array(point[1..<33]))), (.neg(2), .bytes(Array(point[33..<65]))),
        ])
    }
}

enum TestDER {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var out = [tag]
        let n = content.count
        if n < 128 {
            out.append(UInt8(n))
        } else if n < 256 {
            out += [0x81, UInt8(n)]
        } else {
            out += [0x82, UInt8(n >> 8), UInt8(n & 0xff)]
        }
        return out + content
    }

    static func integer(_ value: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var v = value
        repeat {
            bytes.insert(UInt8(v & 0xff), at: 0)
            v >>= 8
        } while v > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }

    static func octets(_ bytes: [UInt8]) -> [UInt8] { tlv(0x04, bytes) }
    static func sequence(_ parts: [[UInt8]]) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }
    static func set(_ parts: [[UInt8]]) -> [UInt8] { tlv(0x31, parts.flatMap { $0 }) }

    /// App Attest receipt payload.
    static func receiptPayload(_ fields: [(Int, [UInt8])]) -> [UInt8] {
        set(fields.map { sequence([integer($0.0), integer(1), octets($0.1)]) })
    }

    /// The credCert nonce extension value: SEQUENCE { [1] EXPLICIT OCTET STRING }.
    static func nonceExtension(_ nonce: [UInt8]) -> [UInt8] {
        sequence([tlv(0xa1, octets(nonce))])
    }
}
