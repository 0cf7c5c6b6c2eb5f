import DeviceSim
import Testing

@Suite("SimDevice.attest")
struct AttestationTests {
    @Test("a valid attestation passes every reference step")
    func validPasses() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        for environment in AttestationEnvironment.allCases {
            let object = try device.attest(
                clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, environment: environment, at: Fixture.time)
            #expect(ReferenceChecks.attestationFailure(object, keyId: device.keyId, fixture: fixture) == nil)
        }
    }

    @Test("authData layout, COSE key and keyId follow app-attest.md §1")
    func structure() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time)
        let parsed = try ParsedAttestation(object)
        #expect(parsed.fmt == "apple-appattest")
        #expect(parsed.x5c.count == 2)
        #expect(parsed.x5c[1] == fixture.ca.intermediate.der)
        #expect(parsed.rpIdHash == OpenSSLChecks.sha256(Array(Fixture.appId.utf8)))
        #expect(parsed.flags == 0x40)
        #expect(parsed.counter == 0)
        #expect(parsed.aaguid == Array("appattestdevelop".utf8))
        #expect(parsed.credentialId == device.keyId)
        #expect(device.keyId == OpenSSLChecks.sha256(device.publicKey))
        #expect(device.publicKey.count == 65 && device.publicKey[0] == 0x04)
        #expect(parsed.authData.count == 55 + 32 + 77)
        #expect(parsed.coseKey.mapEntries?.count == 5)
        #expect(parsed.coseKey[int: 1] == .unsigned(2))
        #expect(parsed.coseKey[int: 3] == .negative(-7))
        #expect(parsed.coseKey[int: -1] == .unsigned(1))
        #expect(parsed.coseKey[int: -2]?.bytesValue == Array(device.publicKey[1..<33]))
        #expect(parsed.coseKey[int: -3]?.bytesValue == Array(device.publicKey[33...]))
        #expect(parsed.extensions == nil)
        #expect(OpenSSLChecks.publicPoint(parsed.x5c[0]) == device.publicKey)
    }

    @Test("production uses the appattest + 7×0x00 AAGUID and a production receipt")
    func production() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(
            clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, environment: .production, at: Fixture.time)
        let parsed = try ParsedAttestation(object)
        #expect(parsed.aaguid == Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 0])
        let content = try require(OpenSSLChecks.receiptContent(
            try require(parsed.receipt), anchor: fixture.receiptCA.root.der, at: Fixture.time))
        let fields = try OpenSSLChecks.receiptFields(content)
        #expect(fields.first { $0.0 == 7 }?.1 == Array("production".utf8))
    }

    @Test("the chain verifies inside the leaf validity and fails outside it or under another root")
    func chainValidity() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time)
        let parsed = try ParsedAttestation(object)
        let leaf = parsed.x5c[0]
        let intermediates = Array(parsed.x5c.dropFirst())
        let root = fixture.ca.root.der
        #expect(OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: intermediates, anchor: root, at: Fixture.time))
        #expect(OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: intermediates, anchor: root, at: Fixture.time + 2 * 86_400))
        #expect(!OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: intermediates, anchor: root, at: Fixture.time + 4 * 86_400))
        #expect(!OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: intermediates, anchor: root, at: Fixture.time - 3600))
        #expect(OpenSSLChecks.notAfter(leaf) == Fixture.time + 3 * 86_400)
        let other = try TestCA(name: "Other", rootCurve: .p256)
        #expect(!OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: intermediates, anchor: other.root.der, at: Fixture.time))
    }

    @Test("the leaf's nonce extension is SEQUENCE { [1] OCTET STRING H(authData ‖ clientDataHash) }")
    func nonce() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        // Any clientDataHash length is legal (Apple's samples pass raw challenges).
        let clientDataHash = Array("example_server_challenge".utf8)
        let object = try device.attest(clientDataHash: clientDataHash, appId: Fixture.appId, at: Fixture.time)
        let parsed = try ParsedAttestation(object)
        let expected = OpenSSLChecks.sha256(parsed.authData + clientDataHash)
        #expect(OpenSSLChecks.extensionValue(parsed.x5c[0], oid: "1.2.840.113635.100.8.2")
                == ReferenceChecks.nonceExtensionPrefix + expected)
        let appIdExtension = try require(OpenSSLChecks.extensionValue(parsed.x5c[0], oid: "1.2.840.113635.100.8.5"))
        #expect(appIdExtension.suffix(Fixture.appId.utf8.count) == ArraySlice(Fixture.appId.utf8))
    }

    @Test("the receipt verifies to the receipt root and carries the attestation's fields")
    func receipt() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time)
        let parsed = try ParsedAttestation(object)
        let receipt = try require(parsed.receipt)
        #expect(OpenSSLChecks.receiptContent(receipt, anchor: fixture.ca.root.der, at: Fixture.time) == nil)
        let content = try require(OpenSSLChecks.receiptContent(receipt, anchor: fixture.receiptCA.root.der, at: Fixture.time))
        let fields = try OpenSSLChecks.receiptFields(content)
        #expect(fields.map(\.0) == [2, 3, 4, 5, 6, 7, 12, 21])
        let byType = Dictionary(fields, uniquingKeysWith: { first, _ in first })
        #expect(byType[2] == Array(Fixture.appId.utf8))
        #expect(byType[3] == parsed.x5c[0])
        #expect(byType[4] == Fixture.clientDataHash)
        #expect(byType[5]?.isEmpty == false)
        #expect(byType[6] == Array("ATTEST".utf8))
        #expect(byType[7] == Array("sandbox".utf8))
        #expect(byType[12] == Array("2026-11-18T11:06:40.000Z".utf8))
        #expect(byType[21] == Array("2027-02-16T11:06:40.000Z".utf8))
    }

    @Test("iOS 27 extensions follow the COSE key with ED clear")
    func extensions() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let options = AttestationOptions(
            extensions: AuthenticatorExtensions(bundleVersion: "1", validationCategory: [1, 0, 0, 0]),
            aclBlob: [0xde, 0xad])
        let object = try device.attest(
            clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time, options: options)
        let parsed = try ParsedAttestation(object)
        #expect(parsed.flags & 0x80 == 0)
        #expect(parsed.extensions?["apple_bundle_version_01"] == .text("1"))
        #expect(parsed.extensions?["apple_validation_category_01"] == .bytes([1, 0, 0, 0]))
        #expect(OpenSSLChecks.extensionValue(parsed.x5c[0], oid: "1.2.840.113635.100.8.6") == [0xde, 0xad])
        #expect(ReferenceChecks.attestationFailure(object, keyId: device.keyId, fixture: fixture) == nil)
    }

    @Test("a development attestation where only production is allowed is environment-not-allowed")
    func environmentNotAllowed() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(
            clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, environment: .development, at: Fixture.time)
        #expect(ReferenceChecks.attestationFailure(
            object, keyId: device.keyId, allowed: ["production"], fixture: fixture) == "environment-not-allowed")
    }
}
