import Foundation
import Testing
import Verifier

@Suite struct TrustAnchorTests {
    /// SHA-256 of the DER certificates, as Apple publishes them
    /// (https://www.apple.com/certificateauthority/), written out here so that
    /// neither a replaced file nor an edited README can change what is trusted.
    static let appAttestationRootSHA256 = "1cb9823ba28ba6ad2d33a006941de2ae4f513ef1d4e831b9f7e0fa7b6242c932"
    static let rootG3SHA256 = "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"

    /// "AA:BB:..." from vectors/README.md for the line naming `name`.
    static func fingerprint(named name: String) throws -> String {
        let readme = try Vectors.text("README.md")
        let line = try #require(readme.split(separator: "\n").first { $0.contains(name) && $0.contains(":") && $0.contains("`") })
        let quoted = try #require(line.split(separator: "`").dropFirst().first)
        return quoted.replacingOccurrences(of: ":", with: "").lowercased()
    }

    @Test func embeddedRootsMatchPublishedFingerprints() throws {
        let attestation = try #require(TrustAnchors.appleAppAttestation.certificatesDER.first)
        let g3 = try #require(TrustAnchors.appleRootG3.certificatesDER.first)
        #expect(TrustAnchors.appleAppAttestation.certificatesDER.count == 1)
        #expect(TrustAnchors.appleRootG3.certificatesDER.count == 1)
        #expect(Hex.encode(SHA256.hash(attestation)) == (try Self.fingerprint(named: "Apple App Attestation Root CA")))
        #expect(Hex.encode(SHA256.hash(g3)) == (try Self.fingerprint(named: "Apple Root CA – G3 (signs receipts)")))
        #expect(Hex.encode(SHA256.hash(attestation)) == Self.appAttestationRootSHA256)
        #expect(Hex.encode(SHA256.hash(g3)) == Self.rootG3SHA256)
    }

    /// The root files among the vectors (Tests/Vectors/roots in the repository)
    /// are Apple's certificates: one each, with the published fingerprints.
    @Test func vectorRootFilesMatchPublishedFingerprints() throws {
        for (file, expected) in [
            ("roots/Apple_App_Attestation_Root_CA.pem", Self.appAttestationRootSHA256),
            ("roots/Apple_Root_CA_G3.pem", Self.rootG3SHA256),
        ] {
            let anchors = try TrustAnchors(pemFiles: [try Vectors.url(file).path])
            #expect(anchors.certificatesDER.count == 1, "\(file)")
            let der = try #require(anchors.certificatesDER.first)
            #expect(Hex.encode(SHA256.hash(der)) == expected, "\(file)")
        }
    }

    @Test func embeddedRootsEqualTheVectorCopies() throws {
        let fromFiles = try TrustAnchors(pemFiles: [
            try Vectors.url("roots/Apple_App_Attestation_Root_CA.pem").path, try Vectors.url("roots/Apple_Root_CA_G3.pem").path,
        ])
        #expect(fromFiles.certificatesDER == TrustAnchors.appleAppAttestation.certificatesDER + TrustAnchors.appleRootG3.certificatesDER)
    }

    @Test func pemWithSeveralCertificates() throws {
        let first = try Vectors.text("roots/Apple_App_Attestation_Root_CA.pem")
        let pem = first + (try Vectors.text("roots/Apple_Root_CA_G3.pem"))
        #expect(try TrustAnchors(pem: pem).certificatesDER.count == 2)
    }

    @Test func invalidAnchorsAreRejected() {
        #expect(throws: TrustAnchors.LoadError.noCertificates(source: "PEM text")) { try TrustAnchors(pem: "") }
        #expect(throws: TrustAnchors.LoadError.noCertificates(source: "PEM text")) {
            try TrustAnchors(pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        }
        #expect(throws: TrustAnchors.LoadError.unreadableFile(path: "/nonexistent/anchor.pem")) {
            try TrustAnchors(pemFiles: ["/nonexistent/anchor.pem"])
        }
    }
}
