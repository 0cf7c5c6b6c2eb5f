import COpenSSL

/// A test stand-in for Apple's App Attestation Root CA: a self-signed root, an
/// intermediate, and credCert leaves carrying the nonce extension. Configure
/// the verifier/gateway with `rootPEM` as the (only) trust anchor.
public final class TestCA: @unchecked Sendable {
    /// 2000-01-01T00:00:00Z and 2099-12-31T00:00:00Z: wide enough for any fixed test time.
    public static let defaultNotBefore: Int64 = 946_684_800
    public static let defaultNotAfter: Int64 = 4_102_358_400

    public let rootKey: ECKey
    public let root: Certificate
    public let intermediateKey: ECKey
    public let intermediate: Certificate
    /// PEM of the root certificate: the trust anchor to configure.
    public let rootPEM: String

    /// Generates a new root (P-384 like Apple's, or P-256) and intermediate.
    public convenience init(
        name: String = "AssertGate Test App Attestation",
        rootCurve: ECKey.Curve = .p384,
        notBefore: Int64 = TestCA.defaultNotBefore,
        notAfter: Int64 = TestCA.defaultNotAfter
    ) throws {
        let rootKey = try ECKey(generating: rootCurve)
        let root = try CertificateBuilder.issue(
            CertificateAuthorityTemplates.root(commonName: "\(name) Root CA", organization: "AssertGate Test",
                                               notBefore: notBefore, notAfter: notAfter),
            subjectKey: rootKey, issuer: nil, issuerKey: rootKey)
        let intermediateKey = try ECKey(generating: rootCurve)
        let intermediate = try CertificateBuilder.issue(
            CertificateAuthorityTemplates.intermediate(commonName: "\(name) CA 1", organization: "AssertGate Test",
                                                       notBefore: notBefore, notAfter: notAfter),
            subjectKey: intermediateKey, issuer: root, issuerKey: rootKey)
        try self.init(rootKey: rootKey, root: root, intermediateKey: intermediateKey, intermediate: intermediate)
    }

    /// Uses existing keys and certificates (e.g. loaded from disk).
    public init(rootKey: ECKey, root: Certificate, intermediateKey: ECKey, intermediate: Certificate) throws {
        self.rootKey = rootKey
        self.root = root
        self.intermediateKey = intermediateKey
        self.intermediate = intermediate
        self.rootPEM = try root.pem()
    }

    /// Issues a credCert for `publicKey` with the nonce extension
    /// (1.2.840.113635.100.8.2: `SEQUENCE { [1] EXPLICIT OCTET STRING nonce }`).
    public func issueCredentialCertificate(
        for publicKey: ECKey, nonce: [UInt8], options: CredentialCertificateOptions
    ) throws -> Certificate {
        let commonName = options.commonName ?? Hex.encode(Digest.sha256(publicKey.uncompressedPoint))
        var template = CertificateTemplate(
            subject: [("CN", commonName), ("OU", "AAA Certification"), ("O", "AssertGate Test")],
            notBefore: options.notBefore, notAfter: options.notAfter)
        template.knownExtensions = [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature,nonRepudiation,keyEncipherment,dataEncipherment"),
        ]
        if let appId = options.appId {
            // Apple nests the App ID as [1204] EXPLICIT OCTET STRING in a SEQUENCE.
            let value = try DERBuilder.sequence(DERBuilder.explicit(1204, DERBuilder.octetString(Array(appId.utf8))))
            template.rawExtensions.append(.init(oid: AppleOID.appId, critical: false, value: value))
        }
        if let osVersion = options.osVersion {
            let value = try DERBuilder.sequence(DERBuilder.explicit(1400, DERBuilder.octetString(Array(osVersion.utf8))))
            template.rawExtensions.append(.init(oid: AppleOID.osVersion, critical: false, value: value))
        }
        if let aclBlob = options.aclBlob {
            // As Apple does: the bytes are the extnValue's contents (a DER SEQUENCE on real keys).
            template.rawExtensions.append(.init(oid: AppleOID.accessControl, critical: false, value: aclBlob))
        }
        let nonceValue = try DERBuilder.sequence(DERBuilder.explicit(1, DERBuilder.octetString(nonce)))
        template.rawExtensions.append(.init(oid: AppleOID.nonce, critical: false, value: nonceValue))
        template.forceSHA256 = true
        return try CertificateBuilder.issue(template, subjectKey: publicKey, issuer: intermediate, issuerKey: intermediateKey)
    }

    private static let files = ["root.key.pem", "root.cert.pem", "intermediate.key.pem", "intermediate.cert.pem"]

    /// Loads a CA written by `save(to:)`.
    public static func load(directory: String) throws -> TestCA {
        let text = try files.map { try PEMDirectory.read(PEMDirectory.join(directory, $0)) }
        return try TestCA(rootKey: ECKey(privateKeyPEM: text[0]), root: Certificate(pem: text[1]),
                          intermediateKey: ECKey(privateKeyPEM: text[2]), intermediate: Certificate(pem: text[3]))
    }

    /// Writes keys (0600) and certificates as PEM files into `directory`.
    public func save(to directory: String) throws {
        let text = [try rootKey.privateKeyPEM(), rootPEM, try intermediateKey.privateKeyPEM(), try intermediate.pem()]
        for (name, contents) in zip(Self.files, text) {
            try PEMDirectory.write(contents, to: PEMDirectory.join(directory, name), secret: name.hasSuffix(".key.pem"))
        }
    }
}

/// Options for one credCert.
public struct CredentialCertificateOptions: Sendable {
    public var notBefore: Int64
    public var notAfter: Int64
    /// Subject CN; nil = lowercase hex of H(public key), as Apple does.
    public var commonName: String?
    /// Adds 1.2.840.113635.100.8.5 with this App ID (informational).
    public var appId: String?
    /// Adds 1.2.840.113635.100.8.7 with this OS version (informational).
    public var osVersion: String?
    /// Adds 1.2.840.113635.100.8.6 (key access-control policy) with these bytes as the
    /// extnValue contents, as Apple writes it (risk.md §1; `SimKeyPolicy` has real forms).
    public var aclBlob: [UInt8]?

    public init(notBefore: Int64, notAfter: Int64, commonName: String? = nil, appId: String? = nil,
                osVersion: String? = nil, aclBlob: [UInt8]? = nil) {
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.commonName = commonName
        self.appId = appId
        self.osVersion = osVersion
        self.aclBlob = aclBlob
    }
}

/// Apple's private OIDs used in credCerts.
public enum AppleOID {
    public static let nonce = "1.2.840.113635.100.8.2"
    public static let appId = "1.2.840.113635.100.8.5"
    public static let accessControl = "1.2.840.113635.100.8.6"
    public static let osVersion = "1.2.840.113635.100.8.7"
}

/// Templates shared by the attestation and receipt CAs.
enum CertificateAuthorityTemplates {
    static func root(commonName: String, organization: String, notBefore: Int64, notAfter: Int64) -> CertificateTemplate {
        var template = CertificateTemplate(
            subject: [("CN", commonName), ("O", organization), ("ST", "California")],
            notBefore: notBefore, notAfter: notAfter)
        template.knownExtensions = [
            (NID_basic_constraints, "critical,CA:TRUE"),
            (NID_subject_key_identifier, "hash"),
            (NID_key_usage, "critical,keyCertSign,cRLSign"),
        ]
        return template
    }

    static func intermediate(commonName: String, organization: String, notBefore: Int64, notAfter: Int64) -> CertificateTemplate {
        var template = CertificateTemplate(
            subject: [("CN", commonName), ("O", organization), ("ST", "California")],
            notBefore: notBefore, notAfter: notAfter)
        template.knownExtensions = [
            (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
            (NID_authority_key_identifier, "keyid:always"),
            (NID_subject_key_identifier, "hash"),
            (NID_key_usage, "critical,keyCertSign,cRLSign"),
        ]
        return template
    }
}

enum Hex {
    static func encode(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        var out = ""
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return out
    }
}
