import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// Owns one OpenSSL `X509`. Immutable after creation; OpenSSL only reads it
/// during verification, so sharing across threads is safe.
final class X509Certificate: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    private init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { X509_free(pointer) }

    /// Takes a new reference on a certificate borrowed from another OpenSSL object.
    convenience init?(retaining borrowed: OpaquePointer?) {
        guard let borrowed, X509_up_ref(borrowed) == 1 else { return nil }
        self.init(owning: borrowed)
    }

    /// Parses one DER certificate; the whole input must be consumed.
    convenience init?(der: [UInt8]) {
        guard !der.isEmpty, der.count <= 64 * 1024 else { return nil }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let cert = d2i_X509(nil, &cursor, buffer.count) else { return nil }
            guard let end = cursor, end == base + buffer.count else {
                X509_free(cert)
                return nil
            }
            return cert
        }
        OpenSSLErrors.clear()
        guard let parsed else { return nil }
        self.init(owning: parsed)
    }

    /// Every certificate in a PEM text (one or more `CERTIFICATE` blocks).
    static func parsePEM(_ pem: String) -> [X509Certificate]? {
        let bytes = Array(pem.utf8)
        guard !bytes.isEmpty, bytes.count <= 1024 * 1024 else { return nil }
        return bytes.withUnsafeBytes { raw -> [X509Certificate]? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            var certs: [X509Certificate] = []
            while let cert = PEM_read_bio_X509(bio, nil, nil, nil) {
                certs.append(X509Certificate(owning: cert))
            }
            // The loop ends with "no start line" at end of input; anything
            // else (a corrupt block) makes the whole text invalid.
            let error = ERR_peek_last_error()
            OpenSSLErrors.clear()
            let noStartLine = ERR_GET_REASON(error) == PEM_R_NO_START_LINE
            guard noStartLine, !certs.isEmpty else { return nil }
            return certs
        }
    }

    var der: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(pointer, &out)
        guard length > 0, let out else { return [] }
        defer { CAssertGate_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// The subject public key as an uncompressed P-256 point `04‖X‖Y`, with
    /// each coordinate left-padded to 32 bytes; nil for any other key type.
    var p256PublicKeyPoint: [UInt8]? {
        guard let key = X509_get0_pubkey(pointer) else {
            OpenSSLErrors.clear()
            return nil
        }
        return P256Point.uncompressed(of: key)
    }

    /// The end of the validity period, in Unix seconds; nil when unreadable.
    var notAfterUnixSeconds: Int64? {
        guard let time = X509_get0_notAfter(pointer) else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        return Int64(timegm(&parts))
    }

    /// The first commonName of the subject (or the issuer), as UTF-8; nil
    /// when there is none.
    func commonName(ofIssuer issuer: Bool = false) -> String? {
        guard let name = issuer ? X509_get_issuer_name(pointer) : X509_get_subject_name(pointer) else { return nil }
        let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else {
            OpenSSLErrors.clear()
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&out, data)
        guard length >= 0, let out else {
            OpenSSLErrors.clear()
            return nil
        }
        defer { CAssertGate_OPENSSL_free(out) }
        return String(decoding: UnsafeBufferPointer(start: out, count: Int(length)), as: UTF8.self)
    }

    /// The DER contents (inside the OCTET STRING) of the extension with the
    /// given dotted OID, or nil when absent.
    func extensionValue(oid: String) -> [UInt8]? {
        guard let object = OBJ_txt2obj(oid, 1) else {
            OpenSSLErrors.clear()
            return nil
        }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(pointer, object, -1)
        guard index >= 0, let ext = X509_get_ext(pointer, index),
            let data = X509_EXTENSION_get_data(ext)
        else { return nil }
        let length = Int(ASN1_STRING_length(data))
        guard length > 0, let bytes = ASN1_STRING_get0_data(data) else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: length))
    }
}
