import COpenSSL

/// SHA-256 through `EVP_Digest` with the algorithm fetched once per process.
/// OpenSSL 3's one-shot `SHA256()` fetches the implementation on every call
/// (a locked name lookup that costs as much as hashing 100 bytes twice).
public enum SHA256 {
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// Hashes borrowed bytes in place (no copy into an array first).
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBufferPointer { out in
            var length: UInt32 = 0
            // A NULL base with count 0 is fine for EVP_Digest; the buffer pointer
            // of an empty array may be nil.
            _ = EVP_Digest(bytes.baseAddress, bytes.count, out.baseAddress, &length, SHA256Algorithm.shared.md, nil)
        }
        return digest
    }

    /// H(a ‖ b) without building the concatenation first.
    public static func hash(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var joined = [UInt8]()
        joined.reserveCapacity(a.count + b.count)
        joined.append(contentsOf: a)
        joined.append(contentsOf: b)
        return hash(joined)
    }

    public static func hash(_ text: String) -> [UInt8] { hash(Array(text.utf8)) }
}

/// The process-wide fetched `EVP_MD` for SHA-256. An `EVP_MD` is immutable
/// once fetched and may be used from any thread; it lives as long as the
/// process, so it is never freed.
final class SHA256Algorithm: @unchecked Sendable {
    static let shared = SHA256Algorithm()
    let md: OpaquePointer

    private init() {
        if let fetched = EVP_MD_fetch(nil, "SHA256", nil) {
            md = fetched
        } else {
            // Fall back to the implicit-fetch handle (still correct, just slower).
            OpenSSLErrors.clear()
            md = EVP_sha256()
        }
    }
}
