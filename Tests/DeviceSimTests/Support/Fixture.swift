import DeviceSim

/// One attestation CA and one receipt CA shared by all tests (key generation
/// is the slow part).
struct Fixture: Sendable {
    static let appId = "ABCDE12345.com.example.app"
    /// 2026-11-18T11:06:40Z.
    static let time: Int64 = 1_795_000_000
    static let clientDataHash = OpenSSLChecks.sha256(Array("assertgate-attest-v1\nchallenge\n".utf8))

    let ca: TestCA
    let receiptCA: ReceiptCA

    private static let cached = Result { try Fixture(ca: TestCA(), receiptCA: ReceiptCA()) }

    static func shared() throws -> Fixture { try cached.get() }

    func device() throws -> SimDevice { try SimDevice(ca: ca, receiptCA: receiptCA) }
}

/// An independent re-statement of app-attest.md §2 and §3 over the tests'
/// own CBOR/DER readers and OpenSSL: returns the first failing reason token.
enum ReferenceChecks {
    static let nonceExtensionPrefix: [UInt8] = [0x30, 0x24, 0xa1, 0x22, 0x04, 0x20]

    static func attestationFailure(
        _ object: [UInt8], keyId: [UInt8], clientDataHash: [UInt8] = Fixture.clientDataHash,
        appId: String = Fixture.appId, allowed: Set<String> = ["development", "production"],
        at time: Int64 = Fixture.time, fixture: Fixture
    ) -> String? {
        guard let parsed = try? ParsedAttestation(object) else { return "malformed-attestation" }
        guard parsed.fmt == "apple-appattest" else { return "unsupported-format" }
        guard let leaf = parsed.x5c.first,
              OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: Array(parsed.x5c.dropFirst()),
                                          anchor: fixture.ca.root.der, at: time)
        else { return "cert-chain-invalid" }
        let nonce = OpenSSLChecks.sha256(parsed.authData + clientDataHash)
        guard OpenSSLChecks.extensionValue(leaf, oid: "1.2.840.113635.100.8.2") == nonceExtensionPrefix + nonce else {
            return "nonce-mismatch"
        }
        guard let point = OpenSSLChecks.publicPoint(leaf), point.count == 65,
              OpenSSLChecks.sha256(point) == keyId else { return "key-id-mismatch" }
        guard parsed.rpIdHash == OpenSSLChecks.sha256(Array(appId.utf8)) else { return "app-id-mismatch" }
        guard parsed.counter == 0 else { return "counter-not-zero" }
        let environment: String
        switch parsed.aaguid {
        case Array("appattestdevelop".utf8): environment = "development"
        case Array("appattest".utf8) + [UInt8](repeating: 0, count: 7): environment = "production"
        default: return "aaguid-mismatch"
        }
        guard allowed.contains(environment) else { return "environment-not-allowed" }
        guard parsed.credentialId == keyId else { return "credential-id-mismatch" }
        let cose = parsed.coseKey
        guard cose[int: 1] == .unsigned(2), cose[int: 3] == .negative(-7), cose[int: -1] == .unsigned(1),
              let x = cose[int: -2]?.bytesValue, let y = cose[int: -3]?.bytesValue,
              [0x04] + x + y == point
        else { return "credential-key-mismatch" }
        guard let receipt = parsed.receipt,
              let content = OpenSSLChecks.receiptContent(receipt, anchor: fixture.receiptCA.root.der, at: time),
              let fields = try? OpenSSLChecks.receiptFields(content),
              fields.first(where: { $0.0 == 2 })?.1 == Array(appId.utf8),
              fields.first(where: { $0.0 == 3 })?.1 == leaf
        else { return "receipt-invalid" }
        return nil
    }

    static func assertionFailure(
        _ object: [UInt8], publicKey: [UInt8], clientDataHash: [UInt8], appId: String = Fixture.appId,
        storedCounter: UInt32
    ) -> String? {
        guard let parsed = try? ParsedAssertion(object), isDERSignature(parsed.signature) else {
            return "malformed-assertion"
        }
        let nonce = OpenSSLChecks.sha256(parsed.authenticatorData + clientDataHash)
        guard OpenSSLChecks.verify(signature: parsed.signature, message: nonce, point: publicKey) else {
            return "bad-signature"
        }
        guard parsed.rpIdHash == OpenSSLChecks.sha256(Array(appId.utf8)) else { return "app-id-mismatch" }
        guard parsed.counter > storedCounter else { return "counter-replay" }
        return nil
    }

    /// ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }, nothing after it.
    static func isDERSignature(_ bytes: [UInt8]) -> Bool {
        guard let sequence = try? TestDER.single(bytes), sequence.tag == 0x30,
              let parts = try? TestDER.sequence(sequence.content)
        else { return false }
        return parts.count == 2 && parts.allSatisfy { $0.tag == 0x02 && !$0.content.isEmpty }
    }
}
