import Verifier
import NIOCore

/// Unpadded b64url (RFC 4648 §5): key ids in Redis key names and JSON,
/// challenges.
enum StoreBase64URL {
    /// Appends the encoding to `buffer` (hot path: Redis key names).
    static func encode(_ bytes: [UInt8], into buffer: inout ByteBuffer) {
        let count = (bytes.count * 4 + 2) / 3
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

    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
}

public enum StoreChallenge {
    /// 32 bytes from the system CSPRNG (getrandom), as unpadded b64url: the issued challenge form.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 32)
        for i in stride(from: 0, to: 32, by: 8) {
            let v = rng.next()
            for j in 0..<8 { bytes[i + j] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(j))) }
        }
        return Base64.encodeURL(bytes)
    }
}
