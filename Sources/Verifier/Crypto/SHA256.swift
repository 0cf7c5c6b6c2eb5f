import COpenSSL

/// SHA-256 through OpenSSL's one-shot `SHA256()` (no context allocation).
public enum SHA256 {
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { out in
                _ = COpenSSL.SHA256(input.baseAddress, input.count, out.baseAddress)
            }
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
