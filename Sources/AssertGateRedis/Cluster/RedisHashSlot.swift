/// Redis Cluster's key → slot mapping (the cluster specification's
/// `HASH_SLOT`): CRC16-XMODEM of the key's hash tag — the bytes between the
/// first `{` and the next `}`, when there are any — or of the whole key,
/// modulo 16384. Every key of one App Attest key carries the tag `{keyId}`,
/// so a script over them runs on one node.
public enum RedisHashSlot {
    public static let count = 16384

    /// The slot of the key named `key` (hash tags honoured).
    public static func slot(forKey key: String) -> UInt16 {
        var utf8 = Array(key.utf8)
        if let open = utf8.firstIndex(of: UInt8(ascii: "{")),
            let close = utf8[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            utf8 = Array(utf8[(open + 1)..<close])
        }
        return slot(ofTag: utf8)
    }

    /// The slot of any key whose hash tag is `tag` (e.g. `ag:{<tag>}:key`).
    public static func slot(ofTag tag: some Sequence<UInt8>) -> UInt16 {
        UInt16(crc16(tag) & 0x3FFF)
    }

    public static func slot(ofTag tag: String) -> UInt16 {
        slot(ofTag: tag.utf8)
    }

    /// The slot of the tag `b64url(bytes)` (unpadded, as the store names
    /// keys), encoded on the fly: no string is built on the commit path.
    public static func slot(ofBase64URLOf bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0
        @inline(__always) func add(_ sextet: UInt32) {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ RedisBase64URL.alphabet[Int(sextet & 0x3F)])]
        }
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            add(v >> 18)
            add(v >> 12)
            add(v >> 6)
            add(v)
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let v = UInt32(bytes[i]) << 16
            add(v >> 18)
            add(v >> 12)
        case 2:
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            add(v >> 18)
            add(v >> 12)
            add(v >> 6)
        default:
            break
        }
        return crc & 0x3FFF
    }

    /// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for b in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ b)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { i in
        var c = UInt16(i) << 8
        for _ in 0..<8 { c = c & 0x8000 != 0 ? (c << 1) ^ 0x1021 : c << 1 }
        return c
    }
}
