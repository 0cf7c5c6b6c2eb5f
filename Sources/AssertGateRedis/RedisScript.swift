import COpenSSL

/// A Lua script known by its SHA-1, as `EVALSHA` wants it. The digest is
/// computed locally so commands can be encoded without asking the server.
public struct RedisScript: Sendable, Hashable {
    public let source: String
    public let sha1: String

    public init(_ source: String) {
        self.source = source
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        let bytes = Array(source.utf8)
        let ok = bytes.withUnsafeBytes { raw in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(raw.baseAddress, raw.count, out.baseAddress, &length, EVP_sha1(), nil)
            }
        }
        // EVP_Digest with SHA-1 cannot fail short of memory exhaustion; an
        // all-zero digest would only make EVALSHA answer NOSCRIPT and reload.
        precondition(ok == 1 && length == 20, "SHA-1 unavailable")
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var s: [UInt8] = []
        s.reserveCapacity(40)
        for b in digest {
            s.append(hex[Int(b >> 4)])
            s.append(hex[Int(b & 0xF)])
        }
        self.sha1 = String(decoding: s, as: UTF8.self)
    }
}
