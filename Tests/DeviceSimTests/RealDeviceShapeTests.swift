import DeviceSim
import Testing

/// DeviceSim must look like a real device where it matters to a verifier:
/// compared against Apple's published 2024 sample (production, no extensions).
@Suite("Shape matches Apple's sample")
struct RealDeviceShapeTests {
    static let samplePath = "apple-attestation-object-validation-guide/apple_2024_sample_attestation.cbor"

    @Test("same top-level keys, authData layout, COSE encoding, nonce extension and receipt fields")
    func sameShape() throws {
        let apple = try ParsedAttestation(Vectors.read(Self.samplePath))
        let appleTop = try TestCBORReader.decode(Vectors.read(Self.samplePath))

        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(clientDataHash: Array("test_server_challenge".utf8),
                                       appId: "0352187391.com.apple.example_app_attest",
                                       environment: .production, at: Fixture.time,
                                       options: AttestationOptions(osVersion: nil))
        let ours = try ParsedAttestation(object)
        let ourTop = try TestCBORReader.decode(object)

        #expect(ourTop.mapEntries?.map(\.key) == appleTop.mapEntries?.map(\.key))
        #expect(ourTop["attStmt"]?.mapEntries?.map(\.key) == appleTop["attStmt"]?.mapEntries?.map(\.key))
        #expect(ours.authData.count == apple.authData.count)
        #expect(ours.rpIdHash == apple.rpIdHash)
        #expect(ours.flags == apple.flags)
        #expect(ours.aaguid == apple.aaguid)
        // COSE key: same map header, labels and value heads, byte for byte.
        let coseHeads: [Int] = [87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 129, 130, 131]
        #expect(coseHeads.map { ours.authData[$0] } == coseHeads.map { apple.authData[$0] })
        #expect(ours.x5c.count == apple.x5c.count)

        let nonceOID = "1.2.840.113635.100.8.2"
        let appleNonce = try require(OpenSSLChecks.extensionValue(apple.x5c[0], oid: nonceOID))
        let ourNonce = try require(OpenSSLChecks.extensionValue(ours.x5c[0], oid: nonceOID))
        #expect(ourNonce.prefix(6) == appleNonce.prefix(6))
        #expect(ourNonce.count == appleNonce.count)
        let appIdOID = "1.2.840.113635.100.8.5"
        let appleAppId = try require(OpenSSLChecks.extensionValue(apple.x5c[0], oid: appIdOID))
        let ourAppId = try require(OpenSSLChecks.extensionValue(ours.x5c[0], oid: appIdOID))
        // Ours is SEQUENCE { [1204] EXPLICIT OCTET STRING appId }: Apple's SEQUENCE holds the same element.
        let element = Array(ourAppId.dropFirst(2))
        #expect(element.first == 0xbf)
        #expect((0...(appleAppId.count - element.count)).contains { Array(appleAppId[$0..<($0 + element.count)]) == element })

        // Receipt payloads: same field types in the same order.
        let appleReceipt = try require(apple.receipt)
        let appleContent = try require(OpenSSLChecks.receiptContent(
            appleReceipt, anchor: try Vectors.appleRootG3(), at: 1_713_456_000))
        let ourContent = try require(OpenSSLChecks.receiptContent(
            try require(ours.receipt), anchor: fixture.receiptCA.root.der, at: Fixture.time))
        #expect(try OpenSSLChecks.receiptFields(ourContent).map(\.0) == OpenSSLChecks.receiptFields(appleContent).map(\.0))
    }
}
