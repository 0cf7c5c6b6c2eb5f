import COpenSSL

enum ConstantTime {
    /// Equal length and equal contents, compared with `CRYPTO_memcmp`.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                CAssertGate_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0
            }
        }
    }
}
