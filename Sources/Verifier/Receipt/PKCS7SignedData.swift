import COpenSSL

/// Owns a parsed PKCS#7 SignedData (BER or DER).
final class PKCS7SignedData {
    private let pointer: UnsafeMutablePointer<PKCS7>

    static let maxSize = 64 * 1024

    init?(der bytes: [UInt8]) {
        guard !bytes.isEmpty, bytes.count <= Self.maxSize else { return nil }
        let parsed: UnsafeMutablePointer<PKCS7>? = bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let p7 = d2i_PKCS7(nil, &cursor, buffer.count) else { return nil }
            guard cursor == base + buffer.count else {
                PKCS7_free(p7)
                return nil
            }
            return p7
        }
        OpenSSLErrors.clear()
        guard let parsed else { return nil }
        guard CAssertGate_PKCS7_is_signed(parsed) == 1 else {
            PKCS7_free(parsed)
            return nil
        }
        self.pointer = parsed
    }

    deinit { PKCS7_free(pointer) }

    var signerCount: Int { Int(CAssertGate_PKCS7_signer_count(pointer)) }

    /// Checks the signature with the embedded signer certificate (not its
    /// chain) and returns the signed content, or nil when it does not verify.
    func verifiedContent() -> [UInt8]? {
        guard let out = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(out) }
        let ok = PKCS7_verify(pointer, nil, nil, nil, out, PKCS7_NOVERIFY)
        OpenSSLErrors.clear()
        guard ok == 1 else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let length = CAssertGate_BIO_get_mem_data(out, &data)
        guard length > 0, let data else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    /// The single signer's certificate.
    func signer() -> X509Certificate? {
        guard let signers = PKCS7_get0_signers(pointer, nil, 0) else {
            OpenSSLErrors.clear()
            return nil
        }
        // The stack is new, its certificates are borrowed from the PKCS7.
        defer { CAssertGate_sk_X509_free(signers) }
        guard CAssertGate_sk_X509_num(signers) == 1 else { return nil }
        return X509Certificate(retaining: CAssertGate_sk_X509_value(signers, 0))
    }

    /// Every certificate carried in the SignedData (untrusted intermediates).
    func certificates() -> [X509Certificate] {
        guard let stack = CAssertGate_PKCS7_signed_certs(pointer) else { return [] }
        let count = min(Int(CAssertGate_sk_X509_num(stack)), 16)
        var certs: [X509Certificate] = []
        for index in 0..<count {
            if let cert = X509Certificate(retaining: CAssertGate_sk_X509_value(stack, Int32(index))) {
                certs.append(cert)
            }
        }
        return certs
    }
}
