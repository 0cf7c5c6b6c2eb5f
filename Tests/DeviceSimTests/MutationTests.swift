import DeviceSim
import Testing

@Suite("Mutations")
struct MutationTests {
    @Test("each attestation mutation fails exactly at its step", arguments: AttestationMutation.allCases)
    func attestationMutationFailsAtItsStep(_ mutation: AttestationMutation) throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(
            clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time, mutation: mutation)
        #expect(ReferenceChecks.attestationFailure(object, keyId: device.keyId, fixture: fixture) == mutation.expectedReason)
    }

    @Test("each attestation mutation changes what it claims", arguments: AttestationMutation.allCases)
    func attestationMutationChangesItsField(_ mutation: AttestationMutation) throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let object = try device.attest(
            clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time, mutation: mutation)
        let baseline = try ParsedAttestation(
            device.attest(clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time))

        switch mutation {
        case .malformedCBOR:
            #expect(throws: TestCBORError.truncated) { try TestCBORReader.decode(object) }
            return
        case .trailingBytes:
            #expect(throws: TestCBORError.trailingBytes) { try TestCBORReader.decode(object) }
            #expect(object.last == 0xf6)
            #expect(ReferenceChecks.attestationFailure(Array(object.dropLast()), keyId: device.keyId, fixture: fixture) == nil)
            return
        case .indefiniteLength:
            #expect(throws: TestCBORError.indefiniteLength) { try TestCBORReader.decode(object) }
            #expect(object.first == 0xbf && object.last == 0xff)
            #expect(try ParsedAttestation(object, strict: false).fmt == "apple-appattest")
            return
        case .duplicateKey:
            #expect(throws: TestCBORError.duplicateKey) { try TestCBORReader.decode(object) }
            let lenient = try TestCBORReader.decode(object, strict: false)
            #expect(lenient.mapEntries?.filter { $0.key == .text("fmt") }.count == 2)
            return
        default:
            break
        }

        let parsed = try ParsedAttestation(object)
        let leaf = parsed.x5c[0]
        let leafPoint = try require(OpenSSLChecks.publicPoint(leaf))
        let anchor = fixture.ca.root.der
        switch mutation {
        case .wrongFormat:
            #expect(parsed.fmt == "wurzelpfropf")
        case .untrustedChain:
            #expect(parsed.x5c.count == 2)
            #expect(parsed.x5c[1] != fixture.ca.intermediate.der)
        case .untrustedChainWithRoot:
            #expect(parsed.x5c.count == 3)
            // The extra element is a real root for this chain, just not a configured one.
            #expect(OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: [parsed.x5c[1]], anchor: parsed.x5c[2], at: Fixture.time))
        case .expiredLeaf:
            #expect(try require(OpenSSLChecks.notAfter(leaf)) < Fixture.time)
            #expect(OpenSSLChecks.chainVerifies(leaf: leaf, untrusted: [parsed.x5c[1]], anchor: anchor,
                                                at: Fixture.time - 8 * 86_400))
        case .wrongNonce:
            let nonce = OpenSSLChecks.sha256(parsed.authData + Fixture.clientDataHash)
            #expect(OpenSSLChecks.extensionValue(leaf, oid: "1.2.840.113635.100.8.2")
                    == ReferenceChecks.nonceExtensionPrefix + OpenSSLChecks.sha256(nonce))
        case .keyIdMismatch:
            #expect(OpenSSLChecks.sha256(leafPoint) != device.keyId)
            #expect(parsed.credentialId == device.keyId)
        case .wrongAppId:
            #expect(parsed.rpIdHash == OpenSSLChecks.sha256(Array(SimDevice.otherAppId.utf8)))
            #expect(parsed.rpIdHash != baseline.rpIdHash)
        case .nonZeroCounter:
            #expect(parsed.counter != 0)
        case .badAAGUID:
            #expect(parsed.aaguid.count == 16)
            #expect(parsed.aaguid != Array("appattestdevelop".utf8))
            #expect(parsed.aaguid != Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 0])
        case .credentialIdMismatch:
            #expect(parsed.credentialId.count == 32)
            #expect(parsed.credentialId != device.keyId)
        case .coseKeyMismatch:
            let x = try require(parsed.coseKey[int: -2]?.bytesValue)
            #expect(parsed.coseKey[int: -1] == .unsigned(1))
            #expect([0x04] + x + (parsed.coseKey[int: -3]?.bytesValue ?? []) != leafPoint)
        case .coseKeyNotP256:
            #expect(parsed.coseKey[int: -1] != .unsigned(1))
            #expect(parsed.coseKey[int: -2]?.bytesValue == Array(leafPoint[1..<33]))
        case .receiptMissing:
            #expect(parsed.receipt == nil)
        case .receiptBadSignature:
            let receipt = try require(parsed.receipt)
            #expect(OpenSSLChecks.receiptContent(receipt, anchor: fixture.receiptCA.root.der, at: Fixture.time) == nil)
            var repaired = receipt
            repaired[repaired.count - 1] ^= 0x01
            #expect(OpenSSLChecks.receiptContent(repaired, anchor: fixture.receiptCA.root.der, at: Fixture.time) != nil)
        case .receiptWrongAppId, .receiptWrongKey:
            let content = try require(OpenSSLChecks.receiptContent(
                try require(parsed.receipt), anchor: fixture.receiptCA.root.der, at: Fixture.time))
            let fields = try OpenSSLChecks.receiptFields(content)
            if mutation == .receiptWrongAppId {
                #expect(fields.first { $0.0 == 2 }?.1 == Array(SimDevice.otherAppId.utf8))
            } else {
                let attested = try require(fields.first { $0.0 == 3 }?.1)
                #expect(attested != leaf)
                #expect(OpenSSLChecks.publicPoint(attested) != leafPoint)
            }
        case .receiptUntrusted:
            let receipt = try require(parsed.receipt)
            #expect(OpenSSLChecks.receiptContent(receipt, anchor: fixture.receiptCA.root.der, at: Fixture.time) == nil)
        case .malformedCBOR, .trailingBytes, .indefiniteLength, .duplicateKey:
            Issue.record("handled above")
        }
    }

    @Test("each assertion mutation fails exactly at its step", arguments: AssertionMutation.allCases)
    func assertionMutation(_ mutation: AssertionMutation) throws {
        let device = try Fixture.shared().device()
        let clientDataHash = AssertionTests.clientDataHash
        let object = try device.assert(clientDataHash: clientDataHash, appId: Fixture.appId, counter: 7, mutation: mutation)
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: device.publicKey, clientDataHash: clientDataHash, storedCounter: 6) == mutation.expectedReason)
        switch mutation {
        case .signatureNotDER:
            #expect(try ParsedAssertion(object).signature.count == 64)
        case .malformedCBOR:
            #expect(throws: TestCBORError.truncated) { try TestCBORReader.decode(object) }
        case .wrongAppId:
            #expect(try ParsedAssertion(object).rpIdHash == OpenSSLChecks.sha256(Array(SimDevice.otherAppId.utf8)))
        case .badSignature:
            #expect(try ParsedAssertion(object).rpIdHash == OpenSSLChecks.sha256(Array(Fixture.appId.utf8)))
        }
    }

    @Test("every mutation names a protocol reason token")
    func reasonTokens() {
        let tokens: Set<String> = [
            "unsupported-format", "cert-chain-invalid", "nonce-mismatch", "key-id-mismatch", "app-id-mismatch",
            "counter-not-zero", "aaguid-mismatch", "credential-id-mismatch", "credential-key-mismatch",
            "receipt-invalid", "malformed-attestation", "bad-signature", "malformed-assertion",
        ]
        #expect(Set(AttestationMutation.allCases.map(\.expectedReason)).isSubset(of: tokens))
        #expect(Set(AssertionMutation.allCases.map(\.expectedReason)).isSubset(of: tokens))
        #expect(AttestationMutation.allCases.count == 21)
    }
}
