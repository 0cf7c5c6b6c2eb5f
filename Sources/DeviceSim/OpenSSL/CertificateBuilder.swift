import COpenSSL

/// What goes into one certificate. Extensions that OpenSSL knows are given in
/// its config syntax; private ones (Apple's OIDs) as raw DER values.
struct CertificateTemplate {
    struct RawExtension {
        var oid: String
        var critical: Bool
        var value: [UInt8]
    }

    var subject: [(field: String, value: String)]
    var notBefore: Int64
    var notAfter: Int64
    /// (NID, config value), e.g. (NID_basic_constraints, "critical,CA:TRUE").
    var knownExtensions: [(nid: Int32, value: String)] = []
    var rawExtensions: [RawExtension] = []
    /// Signature digest: false picks SHA-384 for P-384 issuers, SHA-256 otherwise.
    /// Apple's P-384 intermediate signs credCerts with SHA-256, so leaves force it.
    var forceSHA256 = false
}

/// Builds and signs certificates through OpenSSL's X509 API.
enum CertificateBuilder {
    /// Issues a certificate for `subjectKey`'s public key; self-signed when
    /// `issuer` is nil (then `issuerKey` must be `subjectKey`).
    static func issue(
        _ template: CertificateTemplate, subjectKey: ECKey, issuer: Certificate?, issuerKey: ECKey
    ) throws -> Certificate {
        guard let x509 = X509_new() else { throw DeviceSimError.openSSL("X509_new") }
        // Until handed to Certificate, the X509 is ours to free on every error.
        var handedOver = false
        defer { if !handedOver { X509_free(x509) } }

        guard X509_set_version(x509, 2) == 1 else { throw DeviceSimError.openSSL("X509_set_version") }
        var serialBytes = try Digest.randomBytes(8)
        serialBytes[0] &= 0x7f
        let serial = serialBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard ASN1_INTEGER_set_uint64(X509_get_serialNumber(x509), serial | 1) == 1 else {
            throw DeviceSimError.openSSL("ASN1_INTEGER_set_uint64")
        }

        guard let name = X509_NAME_new() else { throw DeviceSimError.openSSL("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        for entry in template.subject {
            let ok = X509_NAME_add_entry_by_txt(name, entry.field, MBSTRING_UTF8, entry.value, -1, -1, 0)
            guard ok == 1 else { throw DeviceSimError.openSSL("X509_NAME_add_entry_by_txt(\(entry.field))") }
        }
        guard X509_set_subject_name(x509, name) == 1 else { throw DeviceSimError.openSSL("X509_set_subject_name") }
        let issuerName = issuer.map { X509_get_subject_name($0.pointer) } ?? name
        guard X509_set_issuer_name(x509, issuerName) == 1 else { throw DeviceSimError.openSSL("X509_set_issuer_name") }

        try setTime(template.notBefore) { X509_set1_notBefore(x509, $0) }
        try setTime(template.notAfter) { X509_set1_notAfter(x509, $0) }
        guard X509_set_pubkey(x509, subjectKey.pointer) == 1 else { throw DeviceSimError.openSSL("X509_set_pubkey") }

        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuer?.pointer ?? x509, x509, nil, nil, 0)
        for known in template.knownExtensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &ctx, known.nid, known.value) else {
                throw DeviceSimError.openSSL("X509V3_EXT_conf_nid(\(known.nid), \(known.value))")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw DeviceSimError.openSSL("X509_add_ext") }
        }
        for raw in template.rawExtensions {
            try addRawExtension(raw, to: x509)
        }

        let digest = issuerKey.curve == .p384 && !template.forceSHA256 ? EVP_sha384() : EVP_sha256()
        guard X509_sign(x509, issuerKey.pointer, digest) > 0 else { throw DeviceSimError.openSSL("X509_sign") }
        handedOver = true
        return try Certificate(taking: x509)
    }

    private static func setTime(_ seconds: Int64, _ apply: (UnsafeMutablePointer<ASN1_TIME>) -> Int32) throws {
        guard let time = ASN1_TIME_set(nil, time_t(seconds)) else { throw DeviceSimError.openSSL("ASN1_TIME_set") }
        defer { ASN1_TIME_free(time) }
        guard apply(time) == 1 else { throw DeviceSimError.openSSL("X509_set1_notBefore/After") }
    }

    private static func addRawExtension(_ raw: CertificateTemplate.RawExtension, to x509: OpaquePointer) throws {
        guard let object = OBJ_txt2obj(raw.oid, 1) else { throw DeviceSimError.openSSL("OBJ_txt2obj(\(raw.oid))") }
        defer { ASN1_OBJECT_free(object) }
        guard let octets = ASN1_OCTET_STRING_new() else { throw DeviceSimError.openSSL("ASN1_OCTET_STRING_new") }
        defer { ASN1_OCTET_STRING_free(octets) }
        let setOK = raw.value.withUnsafeBufferPointer {
            ASN1_OCTET_STRING_set(octets, $0.baseAddress, Int32($0.count))
        }
        guard setOK == 1 else { throw DeviceSimError.openSSL("ASN1_OCTET_STRING_set") }
        guard let ext = X509_EXTENSION_create_by_OBJ(nil, object, raw.critical ? 1 : 0, octets) else {
            throw DeviceSimError.openSSL("X509_EXTENSION_create_by_OBJ(\(raw.oid))")
        }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(x509, ext, -1) == 1 else { throw DeviceSimError.openSSL("X509_add_ext(\(raw.oid))") }
    }
}
