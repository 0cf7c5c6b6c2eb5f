/// Shape check for a DER `SEQUENCE { r INTEGER, s INTEGER }` ECDSA P-256
/// signature, so a garbled signature is `malformed-assertion` rather than
/// `bad-signature`. OpenSSL re-checks the encoding when verifying.
enum ECDSASignatureDER {
    static func isWellFormed(_ sig: [UInt8]) -> Bool {
        // 2 + 2 × (2 + 33) at most for P-256.
        guard sig.count >= 8, sig.count <= 72, sig[0] == 0x30, Int(sig[1]) == sig.count - 2 else {
            return false
        }
        var index = 2
        for _ in 0..<2 {
            guard index + 2 <= sig.count, sig[index] == 0x02 else { return false }
            let length = Int(sig[index + 1])
            index += 2
            guard length >= 1, length <= 33, index + length <= sig.count else { return false }
            let first = sig[index]
            // Positive and minimal: no sign bit, no redundant leading zero.
            if first & 0x80 != 0 { return false }
            if length > 1, first == 0, sig[index + 1] & 0x80 == 0 { return false }
            if length == 33, first != 0 { return false }
            index += length
        }
        return index == sig.count
    }
}
