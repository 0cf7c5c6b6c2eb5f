import COpenSSL

public enum ConstantTime {
    /// Compares a presented secret with the expected one without an early exit:
    /// the presented bytes are copied into a buffer of the expected length (so
    /// `CRYPTO_memcmp` always runs over the same number of bytes) and the length
    /// check is folded in afterwards.
    public static func equals(_ presented: some Collection<UInt8>, _ expected: some Collection<UInt8>) -> Bool {
        let expectedBytes = Array(expected)
        var padded = [UInt8](repeating: 0, count: expectedBytes.count)
        var i = 0
        for byte in presented {
            if i < padded.count { padded[i] = byte }
            i += 1
        }
        let lengthMatches = i == expectedBytes.count
        if expectedBytes.isEmpty { return false }
        let cmp = padded.withUnsafeBytes { a in
            expectedBytes.withUnsafeBytes { b in
                CAssertGate_memcmp(a.baseAddress, b.baseAddress, expectedBytes.count)
            }
        }
        return (cmp == 0) && lengthMatches
    }

    public static func equals(_ presented: String, _ expected: String) -> Bool {
        equals(presented.utf8, expected.utf8)
    }
}
