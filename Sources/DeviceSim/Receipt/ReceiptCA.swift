import COpenSSL

/// A test stand-in for Apple Root CA – G3 → Apple Application Integration CA 5
/// → "Application Attestation Fraud Receipt Signing": signs receipts as
/// PKCS#7 SignedData (DER) with the signer and intermediate certificates included.
/// Configure the verifier's receipt anchor with `rootPEM`.
public final class ReceiptCA: @unchecked Sendable {
    public let rootKey: ECKey
    public let root: Certificate
    public let intermediateKey: ECKey
    public let intermediate: Certificate
    public let signerKey: ECKey
    public let signer: Certificate
    public let rootPEM: String

    /// Generates a new P-384 root, P-256 intermediate and P-256 signer (Apple's
    /// curves). The signer's validity is separate so tests can make a receipt
    /// whose signer expired after the receipt was created.
    public convenience init(
        name: String = "AssertGate Test Receipt",
        notBefore: Int64 = TestCA.defaultNotBefore,
        notAfter: Int64 = TestCA.defaultNotAfter,
        signerNotBefore: Int64? = nil,
        signerNotAfter: Int64? = nil
    ) throws {
        let rootKey = try ECKey(generating: .p384)
        let root = try CertificateBuilder.issue(
            CertificateAuthorityTemplates.root(commonName: "\(name) Root CA - G3", organization: "AssertGate Test",
                                               notBefore: notBefore, notAfter: notAfter),
            subjectKey: rootKey, issuer: nil, issuerKey: rootKey)
        let intermediateKey = try ECKey(generating: .p256)
        let intermediate = try CertificateBuilder.issue(
            CertificateAuthorityTemplates.intermediate(commonName: "\(name) Integration CA 5 - G1",
                                                       organization: "AssertGate Test",
                                                       notBefore: notBefore, notAfter: notAfter),
            subjectKey: intermediateKey, issuer: root, issuerKey: rootKey)
        let signerKey = try ECKey(generating: .p256)
        var template = CertificateTemplate(
            subject: [("CN", "\(name) Fraud Receipt Signing"), ("O", "AssertGate Test"), ("C", "US")],
            notBefore: signerNotBefore ?? notBefore, notAfter: signerNotAfter ?? notAfter)
        template.knownExtensions = [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_authority_key_identifier, "keyid:always"),
            (NID_subject_key_identifier, "hash"),
            (NID_key_usage, "critical,digitalSignature"),
        ]
        let signer = try CertificateBuilder.issue(template, subjectKey: signerKey, issuer: intermediate, issuerKey: intermediateKey)
        try self.init(rootKey: rootKey, root: root, intermediateKey: intermediateKey, intermediate: intermediate,
                      signerKey: signerKey, signer: signer)
    }

    public init(rootKey: ECKey, root: Certificate, intermediateKey: ECKey, intermediate: Certificate,
                signerKey: ECKey, signer: Certificate) throws {
        self.rootKey = rootKey
        self.root = root
        self.intermediateKey = intermediateKey
        self.intermediate = intermediate
        self.signerKey = signerKey
        self.signer = signer
        self.rootPEM = try root.pem()
    }

    /// Signs `payload` into a DER PKCS#7 SignedData receipt.
    public func sign(_ payload: ReceiptPayload) throws -> [UInt8] {
        try sign(content: payload.der())
    }

    /// Signs arbitrary content (tests of malformed payloads).
    public func sign(content: [UInt8]) throws -> [UInt8] {
        let data = try MemoryBIO(bytes: content)
        guard let certs = CAssertGate_sk_X509_new_null() else { throw DeviceSimError.openSSL("sk_X509_new_null") }
        // The stack borrows; PKCS7_sign takes its own references to the certificates.
        defer { CAssertGate_sk_X509_free(certs) }
        guard CAssertGate_sk_X509_push(certs, intermediate.pointer) > 0 else { throw DeviceSimError.openSSL("sk_X509_push") }
        guard let p7 = PKCS7_sign(signer.pointer, signerKey.pointer, certs, data.pointer, PKCS7_BINARY | PKCS7_NOSMIMECAP) else {
            throw DeviceSimError.openSSL("PKCS7_sign")
        }
        defer { PKCS7_free(p7) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS7(p7, &out)
        guard length > 0, let out else { throw DeviceSimError.openSSL("i2d_PKCS7") }
        defer { CAssertGate_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    private static let files = [
        "receipt-root.key.pem", "receipt-root.cert.pem", "receipt-intermediate.key.pem",
        "receipt-intermediate.cert.pem", "receipt-signer.key.pem", "receipt-signer.cert.pem",
    ]

    public static func load(directory: String) throws -> ReceiptCA {
        let text = try files.map { try PEMDirectory.read(PEMDirectory.join(directory, $0)) }
        return try ReceiptCA(
            rootKey: ECKey(privateKeyPEM: text[0]), root: Certificate(pem: text[1]),
            intermediateKey: ECKey(privateKeyPEM: text[2]), intermediate: Certificate(pem: text[3]),
            signerKey: ECKey(privateKeyPEM: text[4]), signer: Certificate(pem: text[5]))
    }

    public func save(to directory: String) throws {
        let text = [
            try rootKey.privateKeyPEM(), rootPEM, try intermediateKey.privateKeyPEM(), try intermediate.pem(),
            try signerKey.privateKeyPEM(), try signer.pem(),
        ]
        for (name, contents) in zip(Self.files, text) {
            try PEMDirectory.write(contents, to: PEMDirectory.join(directory, name), secret: name.hasSuffix(".key.pem"))
        }
    }
}
