import Foundation
import Testing
import Verifier

/// Every real attestation outside devicecheck-appattest verifies, with the
/// expected key, environment and receipt.
@Suite struct RealAttestationTests {
    @Test(arguments: AttestationCase.fixed)
    func verifies(_ item: AttestationCase) throws {
        let result = try item.verify()
        #expect(result.appId == item.appId)
        #expect(result.environment == item.environment)
        #expect(result.keyId == (try Vectors.base64(item.keyIdBase64)))
        #expect(SHA256.hash(result.publicKey) == result.keyId)
        #expect(result.publicKey.count == 65)
        #expect(result.receipt.appId == item.appId)
        #expect(result.receipt.attestedPublicKey == result.publicKey)
        #expect(result.receipt.kind == .attest)
        #expect(result.receipt.environment == (item.environment == .production ? "production" : "sandbox"))
    }

    @Test func worldcoinAttestationsVerify() throws {
        let cases = try AttestationCase.worldcoin()
        #expect(cases.count == 6)
        let manifest = try #require(try Vectors.json("attestation-gateway-worldcoin/manifest.json") as? [[String: Any]])
        for item in cases {
            let result = try item.verify()
            let file = item.name.replacingOccurrences(of: "worldcoin/", with: "")
            let entry = try #require(manifest.first { $0["file"] as? String == file })
            let spki = try Vectors.base64(try #require(entry["attested_public_key_spki_b64"] as? String))
            #expect(result.publicKey == (try P256PublicKey(spki: spki)).point, "\(item.name)")
            #expect(result.environment == .development)
        }
    }

    @Test func apple2026SampleExposesIOS27Extensions() throws {
        let result = try AttestationCase.apple2026.verify()
        #expect(result.extensions.bundleVersion == "1")
        #expect(result.extensions.validationCategory == [0x01, 0x00, 0x00, 0x00])
        #expect(result.extensions.entries.count == 2)
        #expect(result.aclBlob != nil)
        // risk.md §1: category 1 is `platform`; an iOS key's policy is `other`.
        #expect(result.extensions.launchCategory == 1)
        #expect(LaunchCategory.name(try #require(result.extensions.launchCategory)) == "platform")
        #expect(result.keyPolicy == .other)
        #expect(result.receipt.clientHash == Array("example_server_challenge".utf8))
        #expect(result.receipt.creationTime.text == "2026-04-21T18:13:12.153Z")
        #expect(result.receipt.expirationTime?.text.hasPrefix("2026-07-20") == true)
    }

    @Test func basDKeyMatchesTheExpectedPoint() throws {
        let result = try AttestationCase.basD.verify()
        #expect(result.publicKey == (try Vectors.hex(Vectors.text("appattest-bas-d/attestation_expected_public_key.hex"))))
    }

    @Test func srinivasKeyAndReceiptMatchTheExpectedOnes() throws {
        let result = try AttestationCase.srinivas.verify()
        let json = try #require(try Vectors.json("appattest-checker-node-srinivas1729/testData.json") as? [String: Any])
        let pem = try #require(json["EXPECTED_PUBLIC_KEY_PEM"] as? String)
        #expect(result.publicKey == (try P256PublicKey(pem: pem)).point)
        let receipt = try Vectors.base64(try #require(json["EXPECTED_RECEIPT_BASE64"] as? String))
        #expect(result.receiptBytes == receipt)
        let standalone = try ReceiptVerifier.verify(
            receipt: receipt, appId: AttestationCase.srinivas.appId, publicKey: result.publicKey)
        #expect(standalone == result.receipt)
    }

    @Test func splitsecureProdIsApple2024Sample() throws {
        #expect(try AttestationCase.splitsecureProd.attestation() == AttestationCase.apple2024.attestation())
    }
}
