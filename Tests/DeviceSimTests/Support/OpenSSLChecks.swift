import COpenSSL

// Verification through OpenSSL directly (not through DeviceSim's helpers).

enum OpenSSLChecks {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        _ = SHA256(bytes, bytes.count, &out)
        return out
    }

    /// Parses DER into an X509 the caller frees.
    static func x509(_ der: [UInt8]) -> OpaquePointer? {
        der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
    }

    /// X509_verify_cert of `leaf` with `untrusted` intermediates to `anchor` at `time`.
    static func chainVerifies(leaf: [UInt8], untrusted: [[UInt8]], anchor: [UInt8], at time: Int64) -> Bool {
        guard let store = X509_STORE_new() else { return false }
        defer { X509_STORE_free(store) }
        guard let root = x509(anchor) else { return false }
        defer { X509_free(root) }
        guard X509_STORE_add_cert(store, root) == 1 else { return false }
        guard let leafCert = x509(leaf) else { return false }
        defer { X509_free(leafCert) }
        guard let chain = CAssertGate_sk_X509_new_null() else { return false }
        defer { CAssertGate_sk_X509_pop_free(chain) }
        for der in untrusted {
            guard let cert = x509(der) else { return false }
            guard CAssertGate_sk_X509_push(chain, cert) > 0 else { X509_free(cert); return false }
        }
        guard let ctx = X509_STORE_CTX_new() else { return false }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leafCert, chain) == 1 else { return false }
        X509_STORE_CTX_set_time(ctx, 0, time_t(time))
        let ok = X509_verify_cert(ctx) == 1
        ERR_clear_error()
        return ok
    }

    /// The extension value (OCTET STRING content) for `oid` in a certificate.
    static func extensionValue(_ certDER: [UInt8], oid: String) -> [UInt8]? {
        guard let cert = x509(certDER) else { return nil }
        defer { X509_free(cert) }
        guard let object = OBJ_txt2obj(oid, 1) else { return nil }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(cert, object, -1)
        guard index >= 0, let ext = X509_get_ext(cert, index), let data = X509_EXTENSION_get_data(ext),
              let bytes = ASN1_STRING_get0_data(data) else { return nil }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(data))))
    }

    /// The 65-byte point of a certificate's EC key.
    static func publicPoint(_ certDER: [UInt8]) -> [UInt8]? {
        guard let cert = x509(certDER) else { return nil }
        defer { X509_free(cert) }
        guard let key = X509_get0_pubkey(cert) else { return nil }
        var point = [UInt8](repeating: 0, count: 133)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", &point, point.count, &length) == 1 else { return nil }
        return Array(point.prefix(length))
    }

    static func notAfter(_ certDER: [UInt8]) -> Int64? {
        guard let cert = x509(certDER) else { return nil }
        defer { X509_free(cert) }
        var tm = tm()
        guard ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1 else { return nil }
        return Int64(timegm(&tm))
    }

    /// ECDSA-SHA256 verification of `signature` over `message` with a P-256
    /// point, via a hand-built SubjectPublicKeyInfo.
    static func verify(signature: [UInt8], message: [UInt8], point: [UInt8]) -> Bool {
        let spkiPrefix: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
            0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ]
        let spki = spkiPrefix + point
        let parsed: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key = parsed else { return false }
        defer { EVP_PKEY_free(key) }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let ok = EVP_DigestVerify(ctx, signature, signature.count, message, message.count) == 1
        ERR_clear_error()
        return ok
    }

    /// PKCS7_verify against `anchor` at `time`; the signed content on success.
    static func receiptContent(_ receipt: [UInt8], anchor: [UInt8], at time: Int64) -> [UInt8]? {
        let parsed: UnsafeMutablePointer<PKCS7>? = receipt.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PKCS7(nil, &cursor, buffer.count)
        }
        guard let p7 = parsed else { ERR_clear_error(); return nil }
        defer { PKCS7_free(p7) }
        guard let store = X509_STORE_new() else { return nil }
        defer { X509_STORE_free(store) }
        guard let root = x509(anchor) else { return nil }
        defer { X509_free(root) }
        guard X509_STORE_add_cert(store, root) == 1 else { return nil }
        X509_VERIFY_PARAM_set_time(X509_STORE_get0_param(store), time_t(time))
        guard let out = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(out) }
        guard PKCS7_verify(p7, nil, store, nil, out, PKCS7_BINARY) == 1 else { ERR_clear_error(); return nil }
        var content: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = BIO_read(out, &buffer, Int32(buffer.count))
            if n <= 0 { break }
            content += buffer.prefix(Int(n))
        }
        return content
    }

    /// Receipt payload fields as (type, value), from the DER SET OF SEQUENCE.
    static func receiptFields(_ payload: [UInt8]) throws -> [(Int, [UInt8])] {
        let set = try TestDER.single(payload)
        guard set.tag == 0x31 else { throw ParseError.shape }
        return try TestDER.sequence(set.content).map { element in
            guard element.tag == 0x30 else { throw ParseError.shape }
            let parts = try TestDER.sequence(element.content)
            guard parts.count == 3, parts[0].tag == 0x02, parts[1].tag == 0x02, parts[2].tag == 0x04 else {
                throw ParseError.shape
            }
            let type = parts[0].content.reduce(0) { $0 << 8 | Int($1) }
            return (type, parts[2].content)
        }
    }
}
