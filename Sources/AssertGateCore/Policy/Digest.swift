import COpenSSL

/// HMAC-SHA256 on OpenSSL's one-shot functions (no context to
/// leak, safe from any thread).
public enum Digest {
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
