import Testing
import Verifier

/// Receipt verification edge cases with the synthetic receipt PKI.
@Suite struct ReceiptTests {
    let pki = TestPKI()
    let leafPoint = TestKey().point

    func receipt(_ fields: [(Int, [UInt8])], signer: TestCert? = nil) -> [UInt8] {
        (signer ?? pki.receiptSigner).signPKCS7(TestDER.receiptPayload(fields), extra: [])
    }

    var anchors: TrustAnchors { get throws { try TrustAnchors(pem: pki.receiptRoot.pem) } }

    func leafDER(_ key: TestKey) -> [UInt8] {
        TestCert(subject: "leaf", issuer: pki.intermediate, key: key, isCA: false,
                 notBefore: TestPKI.t0 - 60, notAfter: TestPKI.t0 + 60).der
    }

    func fields(key: TestKey, creation: String = "2023-11-14T22:13:20Z") -> [(Int, [UInt8])] {
        [(2, Array(TestPKI.appId.utf8)), (3, leafDER(key)), (6, Array("RECEIPT".utf8)), (12, Array(creation.utf8)),
         (17, Array("2".utf8)), (19, Array("2023-11-15T22:13:20.000000001Z".utf8))]
    }

    @Test func refreshedReceiptFields() throws {
        let key = TestKey()
        let result = try ReceiptVerifier.verify(
            receipt: receipt(fields(key: key)), appId: TestPKI.appId, publicKey: key.point, anchors: anchors)
        #expect(result.kind == .receipt)
        #expect(result.riskMetric == 2)
        #expect(result.notBefore?.nanoseconds == 1)
        #expect(result.environment == nil)
        #expect(result.attestedPublicKey == key.point)
    }

    @Test func chainIsCheckedAtTheReceiptsOwnCreationTime() throws {
        let key = TestKey()
        // The signer is valid t0 ± 30 days: a receipt claiming a later creation fails.
        let late = receipt(fields(key: key, creation: "2024-06-01T00:00:00Z"))
        let anchors = try anchors
        expectReason(.receiptInvalid) { () throws(VerificationError) in
            _ = try ReceiptVerifier.verify(receipt: late, anchors: anchors)
        }
        // Just past the signer's notAfter, inside the skew: accepted; without skew: refused.
        let edge = receipt(fields(key: key, creation: "2023-12-14T22:13:50Z"))
        _ = try ReceiptVerifier.verify(receipt: edge, anchors: anchors, clockSkew: 60)
        expectReason(.receiptInvalid) { () throws(VerificationError) in
            _ = try ReceiptVerifier.verify(receipt: edge, anchors: anchors, clockSkew: 0)
        }
    }

    @Test func payloadProblemsAreReceiptInvalid() throws {
        let key = TestKey()
        let anchors = try anchors
        let base = fields(key: key)
        let cases: [[(Int, [UInt8])]] = [
            base.filter { $0.0 != 2 },  // no App ID
            base.filter { $0.0 != 3 },  // no certificate
            base.filter { $0.0 != 12 },  // no creation time
            base.map { $0.0 == 12 ? (12, Array("yesterday".utf8)) : $0 },
            base.map { $0.0 == 6 ? (6, Array("OTHER".utf8)) : $0 },
            base.map { $0.0 == 17 ? (17, Array("many".utf8)) : $0 },
            base + [(2, Array("X.y".utf8))],  // duplicate App ID
        ]
        for fields in cases {
            let bytes = receipt(fields)
            expectReason(.receiptInvalid) { () throws(VerificationError) in
                _ = try ReceiptVerifier.verify(receipt: bytes, anchors: anchors)
            }
        }
        expectReason(.receiptInvalid) { () throws(VerificationError) in
            _ = try ReceiptVerifier.verify(receipt: [0x30, 0x03, 0x02, 0x01, 0x00], anchors: anchors)
        }
        let good = receipt(base)
        expectReason(.receiptInvalid) { () throws(VerificationError) in
            _ = try ReceiptVerifier.verify(receipt: good, appId: TestPKI.appId, publicKey: TestKey().point, anchors: anchors)
        }
        expectReason(.receiptInvalid) { () throws(VerificationError) in
            _ = try ReceiptVerifier.verify(receipt: good, appId: "Z.z", publicKey: key.point, anchors: anchors)
        }
        // A tampered byte inside the signed content breaks the signature.
        var tampered = good
        if let range = tampered.firstRange(of: Array("RECEIPT".utf8)) { tampered[range.lowerBound] = UInt8(ascii: "X") }
        expectReason(.receiptInvalid) { () throws(VerificationError) in
            _ = try ReceiptVerifier.verify(receipt: tampered, anchors: anchors)
        }
        // Real Apple roots do not anchor the test signer.
        expectReason(.receiptInvalid) { () throws(VerificationError) in _ = try ReceiptVerifier.verify(receipt: good) }
    }
}
