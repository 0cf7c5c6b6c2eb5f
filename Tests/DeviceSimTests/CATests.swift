import DeviceSim
import Testing

@Suite("Test CAs and receipts")
struct CATests {
    @Test("a saved TestCA loads with the same root and issues leaves that chain to it")
    func testCAPersistence() throws {
        let ca = try TestCA(rootCurve: .p256)
        let directory = try TemporaryDirectory.make()
        try ca.save(to: directory)
        let loaded = try TestCA.load(directory: directory)
        #expect(loaded.rootPEM == ca.rootPEM)
        #expect(loaded.rootPEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(loaded.intermediate.der == ca.intermediate.der)
        let key = try ECKey(generating: .p256)
        let leaf = try loaded.issueCredentialCertificate(
            for: key, nonce: [UInt8](repeating: 7, count: 32),
            options: CredentialCertificateOptions(notBefore: Fixture.time, notAfter: Fixture.time + 10))
        #expect(OpenSSLChecks.chainVerifies(leaf: leaf.der, untrusted: [ca.intermediate.der], anchor: ca.root.der,
                                            at: Fixture.time + 5))
        #expect(!OpenSSLChecks.chainVerifies(leaf: leaf.der, untrusted: [ca.intermediate.der], anchor: ca.root.der,
                                             at: Fixture.time + 11))
    }

    @Test("a saved ReceiptCA loads and signs receipts that verify to the original root")
    func receiptCAPersistence() throws {
        let fixture = try Fixture.shared()
        let directory = try TemporaryDirectory.make()
        try fixture.receiptCA.save(to: directory)
        let loaded = try ReceiptCA.load(directory: directory)
        let payload = ReceiptPayload(
            appId: Fixture.appId, attestedPublicKey: [1, 2, 3], clientHash: [4], token: "t", kind: .receipt,
            environment: .production, createdAtMillis: 1_709_251_199_999, riskMetric: 3,
            notBeforeMillis: 1_709_251_200_000, expiresAtMillis: 1_709_251_200_001)
        let receipt = try loaded.sign(payload)
        let content = try require(OpenSSLChecks.receiptContent(receipt, anchor: fixture.receiptCA.root.der, at: Fixture.time))
        let fields = try OpenSSLChecks.receiptFields(content)
        #expect(fields.map(\.0) == [2, 3, 4, 5, 6, 7, 12, 17, 19, 21])
        let byType = Dictionary(fields, uniquingKeysWith: { first, _ in first })
        #expect(byType[6] == Array("RECEIPT".utf8))
        #expect(byType[12] == Array("2024-02-29T23:59:59.999Z".utf8))
        #expect(byType[17] == Array("3".utf8))
        #expect(byType[19] == Array("2024-03-01T00:00:00.000Z".utf8))
        #expect(byType[21] == Array("2024-03-01T00:00:00.001Z".utf8))
    }

    @Test("a receipt verifies at its creation time even after its signer expired")
    func expiredSigner() throws {
        let created: Int64 = 1_700_000_000
        let receiptCA = try ReceiptCA(signerNotBefore: created - 86_400, signerNotAfter: created + 86_400)
        let receipt = try receiptCA.sign(content: [0x31, 0x00])
        #expect(OpenSSLChecks.receiptContent(receipt, anchor: receiptCA.root.der, at: created) == [0x31, 0x00])
        #expect(OpenSSLChecks.receiptContent(receipt, anchor: receiptCA.root.der, at: created + 2 * 86_400) == nil)
    }
}
