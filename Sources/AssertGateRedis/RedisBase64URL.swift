import NIOCore

/// Unpadded b64url (RFC 4648 §5) for key names whose hash tag is the
/// encoding of raw bytes (`ag:{<b64url(keyId)>}:key`): written straight into
/// a command (`RESPCommandWriter.bulkKey`) and hashed straight into a slot
/// (`RedisHashSlot.slot(ofBase64URLOf:)`), so the commit path builds no String.
enum RedisBase64URL {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Length of the encoding of `count` bytes.
    static func encodedCount(_ count: Int) -> Int { (count * 4 + 2) / 3 }

    /// Appends the encoding to `buffer`.
    static func encode(_ bytes: [UInt8], into buffer: inout ByteBuffer) {
        let count = encodedCount(bytes.count)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { out in
            alphabet.withUnsafeBufferPointer { a in
                var o = 0
                var i = 0
                while i + 3 <= bytes.count {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    out[o] = a[Int(v >> 18 & 63)]
                    out[o + 1] = a[Int(v >> 12 & 63)]
                    out[o + 2] = a[Int(v >> 6 & 63)]
                    out[o + 3] = a[Int(v & 63)]
                    o += 4
                    i += 3
                }
                let rest = bytes.count - i
                if rest > 0 {
                    let v = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
                    out[o] = a[Int(v >> 18 & 63)]
                    out[o + 1] = a[Int(v >> 12 & 63)]
                    if rest == 2 { out[o + 2] = a[Int(v >> 6 & 63)] }
                }
            }
            return count
        }
    }
}
