import COpenSSL

/// SHA-256 and HMAC-SHA256 on OpenSSL's one-shot functions (no context to
/// leak, safe from any thread).
public enum Digest {
    public static func sha256<Bytes: Collection>(_ data: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var out = [UInt8](repeating: 0, count: 32)
        let done: Bool? = data.withContiguousStorageIfAvailable { buf in
            out.withUnsafeMutableBufferPointer { o in
                SHA256(buf.baseAddress, buf.count, o.baseAddress) != nil
            }
        }
        if done == nil {
            let copy = Array(data)
            _ = copy.withUnsafeBufferPointer { buf in
                out.withUnsafeMutableBufferPointer { o in SHA256(buf.baseAddress, buf.count, o.baseAddress) }
            }
        }
        return out
    }

    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var outLen: UInt32 = 0
        key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in
                    _ = HMAC(
                        EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress, m.count,
                        o.baseAddress, &outLen)
                }
            }
        }
        return out
    }
}

public enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
