import COpenSSL

/// SHA-256 through OpenSSL's one-shot EVP digest.
public enum SHA256Digest {
    public static func hash<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var out = [UInt8](repeating: 0, count: 32)
        let input = Array(bytes)
        var length: UInt32 = 0
        let ok = input.withUnsafeBytes { inp in
            out.withUnsafeMutableBytes { o in
                EVP_Digest(inp.baseAddress, inp.count, o.baseAddress?.assumingMemoryBound(to: UInt8.self), &length,
                           EVP_sha256(), nil)
            }
        }
        // EVP_Digest with SHA-256 fails only on allocation failure.
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return out
    }

    public static func hex<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        HexEncoding.lowercase(hash(bytes))
    }
}

public enum HexEncoding {
    public static func lowercase(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
