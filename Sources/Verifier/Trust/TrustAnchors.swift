/// A set of trusted root certificates. Only these are ever trusted: a
/// certificate that arrives inside an attestation or receipt is at most an
/// untrusted intermediate.
public struct TrustAnchors: Sendable {
    public enum LoadError: Error, Sendable, Hashable, CustomStringConvertible {
        case noCertificates(source: String)
        case unreadableFile(path: String)

        public var description: String {
            switch self {
            case .noCertificates(let source): return "\(source) holds no valid PEM certificate"
            case .unreadableFile(let path): return "cannot read trust anchor file \(path)"
            }
        }
    }

    let store: X509Store

    /// A receipt chaining to these anchors must also be signed by Apple's
    /// receipt signer (`ReceiptVerifier`). True when one of them is Apple Root
    /// CA – G3: many CAs sit under it, developer certificates' among them,
    /// whose keys are developers'. Other anchors (a software device's test
    /// CA) are the operator's own; tests set it to check the rule with them.
    public var requiresAppleReceiptSigner: Bool

    /// DER of every anchor, in load order.
    public var certificatesDER: [[UInt8]] { store.anchors.map(\.der) }

    /// Every certificate in `pem` (one or more `CERTIFICATE` blocks).
    public init(pem: String) throws(LoadError) {
        try self.init(pems: [(pem, "PEM text")])
    }

    /// Every certificate in every file; each file may hold several.
    public init(pemFiles: [String]) throws(LoadError) {
        var pems: [(String, String)] = []
        for path in pemFiles {
            guard let text = FileReader.readText(path, limit: 1024 * 1024) else {
                throw .unreadableFile(path: path)
            }
            pems.append((text, path))
        }
        try self.init(pems: pems)
    }

    private init(pems: [(String, String)]) throws(LoadError) {
        var certs: [X509Certificate] = []
        for (pem, source) in pems {
            guard let parsed = X509Certificate.parsePEM(pem) else { throw .noCertificates(source: source) }
            certs += parsed
        }
        guard !certs.isEmpty, let store = X509Store(anchors: certs) else {
            throw .noCertificates(source: pems.first?.1 ?? "no files")
        }
        self.store = store
        let g3 = Self.appleRootG3DER
        requiresAppleReceiptSigner = !g3.isEmpty && certs.contains { $0.der == g3 }
    }

    private static let appleRootG3DER: [UInt8] = X509Certificate.parsePEM(AppleRoots.rootCAG3)?.first?.der ?? []

    /// Apple App Attestation Root CA: the default anchor for attestation chains.
    public static let appleAppAttestation = embedded(AppleRoots.appAttestationRootCA)
    /// Apple Root CA – G3: the default anchor for receipts.
    public static let appleRootG3 = embedded(AppleRoots.rootCAG3)

    private static func embedded(_ pem: String) -> TrustAnchors {
        do {
            return try TrustAnchors(pem: pem)
        } catch {
            // A compiled-in constant, not input: unreachable unless the source is corrupted.
            preconditionFailure("embedded Apple root does not parse: \(error)")
        }
    }
}
