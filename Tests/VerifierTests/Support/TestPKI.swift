import COpenSSL
import Verifier

/// A P-256 key pair owned by the test.
final class TestKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init() {
        guard let key = CAssertGate_EVP_EC_gen_P256() else { fatalError("P-256 keygen failed") }
        pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }

    var point: [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65)
        var length = 0
        let ok = buffer.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_octet_string_param(pointer, "pub", $0.baseAddress, $0.count, &length)
        }
        precondition(ok == 1 && length == 65)
        return buffer
    }

    /// DER ECDSA-SHA256 signature over `message`.
    func sign(_ message: [UInt8]) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { fatalError() }
        defer { EVP_MD_CTX_free(ctx) }
        precondition(EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pointer) == 1)
        var length = 0
        precondition(EVP_DigestSign(ctx, nil, &length, message, message.count) == 1)
        var sig = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(ctx, &sig, &length, message, message.count) == 1)
        return Array(sig[0..<length])
    }
}

/// A certificate built by the test, owning its `X509`.
final class TestCert: @unchecked Sendable {
    let pointer: OpaquePointer
    let key: TestKey

    init(
        subject: String, issuer: TestCert?, key: TestKey, isCA: Bool, notBefore: Int64, notAfter: Int64,
        extensions: [(oid: String, value: [UInt8])] = [], serial: Int = 1
    ) {
        guard let x = X509_new() else { fatalError() }
        pointer = x
        self.key = key
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial)
        ASN1_TIME_set(X509_getm_notBefore(x), time_t(notBefore))
        ASN1_TIME_set(X509_getm_notAfter(x), time_t(notAfter))
        let name = X509_NAME_new()
        defer { X509_NAME_free(name) }
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, subject, -1, -1, 0)
        X509_set_subject_name(x, name)
        X509_set_issuer_name(x, issuer.map { X509_get_subject_name($0.pointer) } ?? name)
        X509_set_pubkey(x, key.pointer)
        if isCA {
            add(nid: NID_basic_constraints, "critical,CA:TRUE")
            add(nid: NID_key_usage, "critical,keyCertSign,cRLSign")
        } else {
            add(nid: NID_basic_constraints, "critical,CA:FALSE")
        }
        for ext in extensions {
            guard let obj = OBJ_txt2obj(ext.oid, 1), let data = ASN1_OCTET_STRING_new() else { fatalError() }
            defer { ASN1_OBJECT_free(obj); ASN1_OCTET_STRING_free(data) }
            ASN1_OCTET_STRING_set(data, ext.value, Int32(ext.value.count))
            guard let e = X509_EXTENSION_create_by_OBJ(nil, obj, 0, data) else { fatalError() }
            X509_add_ext(x, e, -1)
            X509_EXTENSION_free(e)
        }
        precondition(X509_sign(x, (issuer?.key ?? key).pointer, EVP_sha256()) > 0)
    }

    private func add(nid: Int32, _ value: String) {
        guard let e = X509V3_EXT_conf_nid(nil, nil, nid, value) else { fatalError() }
        X509_add_ext(pointer, e, -1)
        X509_EXTENSION_free(e)
    }

    deinit { X509_free(pointer) }

    var der: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_X509(pointer, &out)
        guard n > 0, let out else { fatalError() }
        defer { CAssertGate_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }

    var pem: String {
        guard let bio = BIO_new(BIO_s_mem()) else { fatalError() }
        defer { BIO_free(bio) }
        PEM_write_bio_X509(bio, pointer)
        var data: UnsafeMutablePointer<CChar>?
        let n = CAssertGate_BIO_get_mem_data(bio, &data)
        guard let data else { fatalError() }
        return data.withMemoryRebound(to: UInt8.self, capacity: n) {
            String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
        }
    }

    /// PKCS#7 SignedData (DER) over `content`, signed by this certificate,
    /// carrying `extra` certificates.
    func signPKCS7(_ content: [UInt8], extra: [TestCert]) -> [UInt8] {
        guard let bio = BIO_new_mem_buf(content, Int32(content.count)), let stack = CAssertGate_sk_X509_new_null()
        else { fatalError() }
        defer { BIO_free(bio); CAssertGate_sk_X509_free(stack) }
        for cert in extra { _ = CAssertGate_sk_X509_push(stack, cert.pointer) }
        guard let p7 = PKCS7_sign(pointer, key.pointer, stack, bio, PKCS7_BINARY) else { fatalError() }
        defer { PKCS7_free(p7) }
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_PKCS7(p7, &out)
        guard n > 0, let out else { fatalError() }
        defer { CAssertGate_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }
}

/// A synthetic App Attest world: attestation CA chain and receipt chain,
/// and a builder for attestation objects with any field altered.
struct TestPKI {
    static let t0: Int64 = 1_700_000_000
    let root = TestCert(subject: "Test App Attestation Root", issuer: nil, key: TestKey(), isCA: true,
                        notBefore: t0 - 86_400 * 365, notAfter: t0 + 86_400 * 365)
    let intermediate: TestCert
    let receiptRoot = TestCert(subject: "Test Receipt Root", issuer: nil, key: TestKey(), isCA: true,
                               notBefore: t0 - 86_400 * 365, notAfter: t0 + 86_400 * 365)
    let receiptSigner: TestCert

    init() {
        intermediate = TestCert(subject: "Test App Attestation CA 1", issuer: root, key: TestKey(), isCA: true,
                                notBefore: Self.t0 - 86_400 * 30, notAfter: Self.t0 + 86_400 * 30)
        receiptSigner = TestCert(subject: "Test Receipt Signing", issuer: receiptRoot, key: TestKey(), isCA: false,
                                 notBefore: Self.t0 - 86_400 * 30, notAfter: Self.t0 + 86_400 * 30)
    }

    var verifier: AttestationVerifier {
        get throws {
            AttestationVerifier(anchors: try TrustAnchors(pem: root.pem), receiptAnchors: try TrustAnchors(pem: receiptRoot.pem))
        }
    }

    static let appId = "ABCDE12345.com.example.test"
    static let clientDataHash = SHA256.hash(Array("test-challenge".utf8))

    /// Every field of a synthetic attestation; alter one, then `build()`.
    struct Attestation {
        var key = TestKey()
        var appId = TestPKI.appId
        var counter: UInt32 = 0
        var aaguid = Array("appattestdevelop".utf8)
        var credentialId: [UInt8]?
        var coseKey: TestCBOR?
        var extensions: [UInt8] = []
        var fmt = "apple-appattest"
        var receiptAppId: String?
        var receiptSigner: TestCert?
        /// Certificates the receipt carries besides its signer's.
        var receiptExtra: [TestCert] = []
        var receiptKind = "ATTEST"
        var receiptCreation = "2023-11-14T22:13:21.5Z"
        var receiptNotBefore: String?
        var includeReceipt = true
        var includeRootInX5c = false
    }

    func build(_ a: Attestation) -> (object: [UInt8], keyId: [UInt8], point: [UInt8]) {
        let point = a.key.point
        let keyId = SHA256.hash(point)
        var authData = SHA256.hash(Array(a.appId.utf8)) + [0x40]
        authData += [UInt8(a.counter >> 24), UInt8(a.counter >> 16 & 0xff), UInt8(a.counter >> 8 & 0xff), UInt8(a.counter & 0xff)]
        let credentialId = a.credentialId ?? keyId
        authData += a.aaguid + [UInt8(credentialId.count >> 8), UInt8(credentialId.count & 0xff)] + credentialId
        authData += (a.coseKey ?? TestCBOR.coseKey(point)).encoded + a.extensions
        let nonce = SHA256.hash(authData + Self.clientDataHash)
        let leaf = TestCert(
            subject: Hex.encode(keyId), issuer: intermediate, key: a.key, isCA: false,
            notBefore: Self.t0 - 3600, notAfter: Self.t0 + 86_400 * 3,
            extensions: [("1.2.840.113635.100.8.2", TestDER.nonceExtension(nonce))])
        var fields: [(Int, [UInt8])] = [
            (2, Array((a.receiptAppId ?? a.appId).utf8)), (3, leaf.der), (4, Self.clientDataHash),
            (5, Array("token".utf8)), (6, Array(a.receiptKind.utf8)), (7, Array("sandbox".utf8)),
            (12, Array(a.receiptCreation.utf8)),
        ]
        if let notBefore = a.receiptNotBefore { fields.append((19, Array(notBefore.utf8))) }
        fields.append((21, Array("2024-02-12T22:13:21.5Z".utf8)))
        let payload = TestDER.receiptPayload(fields)
        let receipt = (a.receiptSigner ?? receiptSigner).signPKCS7(payload, extra: a.receiptExtra)
        var x5c: [TestCBOR] = [.bytes(leaf.der), .bytes(intermediate.der)]
        if a.includeRootInX5c { x5c.append(.bytes(root.der)) }
        var statement: [(TestCBOR, TestCBOR)] = [(.text("x5c"), .array(x5c))]
        if a.includeReceipt { statement.append((.text("receipt"), .bytes(receipt))) }
        let object = TestCBOR.map([
            (.text("fmt"), .text(a.fmt)), (.text("attStmt"), .map(statement)), (.text("authData"), .bytes(authData)),
        ])
        return (object.encoded, keyId, point)
    }
}
