import Foundation
import Testing
import Verifier

/// The known-invalid mutations of the vector READMEs, applied to real data:
/// each must fail with the matching reason token.
@Suite struct RealVectorMutationTests {
    static let dc = DeviceCheckDocument.appId

    static func deviceCheck(_ type: String, file: String = "ios-14.4") throws -> DeviceCheckDocument {
        try #require(try DeviceCheckDocument.load(file).first { $0.type == type })
    }

    static func attest(
        _ doc: DeviceCheckDocument, bytes: [UInt8]? = nil, appId: String = dc,
        allowed: Set<AppAttestEnvironment> = [.development], keyId: [UInt8]? = nil, clientData: String = "wurzelpfropf",
        at: Int64? = nil, verifier: AttestationVerifier = AttestationVerifier()
    ) throws -> () throws(VerificationError) -> Void {
        let bytes = try bytes ?? Vectors.base64(try #require(doc.string("attestationBase64")))
        let keyId = try keyId ?? Vectors.base64(try #require(doc.string("keyIdBase64")))
        let time = try at ?? Vectors.time(try #require(doc.string("timestamp")))
        return { () throws(VerificationError) in
            _ = try verifier.verify(
                attestationObject: bytes, keyId: keyId, clientDataHash: Vectors.sha256(clientData),
                allowedApps: [appId: allowed], at: time)
        }
    }

    @Test func wrongFormatIsUnsupported() throws {
        let doc = try Self.deviceCheck("attestation")
        var bytes = try Vectors.base64(try #require(doc.string("attestationBase64")))
        // "fmt" is the first key; its value "apple-appattest" is 15 bytes of text (0x6f).
        let fmt = Array("apple-appattest".utf8)
        let start = try #require(bytes.firstRange(of: fmt))
        bytes.replaceSubrange(start, with: Array("wurzelpfropfabc".utf8))
        expectReason(.unsupportedFormat, try Self.attest(doc, bytes: bytes))
    }

    @Test func wrongAppIdIsAppIdMismatch() throws {
        expectReason(.appIdMismatch, try Self.attest(try Self.deviceCheck("attestation"), appId: "WURZELPFRO.PF"))
    }

    @Test func wrongChallengeIsNonceMismatch() throws {
        expectReason(.nonceMismatch, try Self.attest(try Self.deviceCheck("attestation"), clientData: "fporfplezruw"))
    }

    @Test func wrongKeyIdIsKeyIdMismatch() throws {
        let doc = try Self.deviceCheck("attestation")
        expectReason(.keyIdMismatch, try Self.attest(doc, keyId: Vectors.sha256("fporfplezruw")))
    }

    @Test func timePastLeafExpiryIsCertChainInvalid() throws {
        // ios-14.4 leaf: 2021-01-22 12:13:35 → 2021-01-25 12:13:35.
        let doc = try Self.deviceCheck("attestation")
        expectReason(.certChainInvalid, try Self.attest(doc, at: try Vectors.time("2021-01-25T12:15:00Z")))
        expectReason(.certChainInvalid, try Self.attest(doc, at: try Vectors.time("2021-01-22T12:11:00Z")))
    }

    @Test func clockSkewWindowIsHonoured() throws {
        let doc = try Self.deviceCheck("attestation")
        let justAfter = try Vectors.time("2021-01-25T12:14:00Z")  // 25 s past notAfter
        try Self.attest(doc, at: justAfter)()
        expectReason(.certChainInvalid, try Self.attest(doc, at: justAfter, verifier: AttestationVerifier(clockSkewSeconds: 0)))
    }

    @Test func wrongAnchorIsCertChainInvalid() throws {
        let doc = try Self.deviceCheck("attestation")
        let wrong = AttestationVerifier(anchors: .appleRootG3)
        expectReason(.certChainInvalid, try Self.attest(doc, verifier: wrong))
    }

    @Test func wrongReceiptAnchorIsReceiptInvalid() throws {
        let doc = try Self.deviceCheck("attestation")
        let wrong = AttestationVerifier(receiptAnchors: .appleAppAttestation)
        expectReason(.receiptInvalid, try Self.attest(doc, verifier: wrong))
    }

    @Test func productionOnlyForDevelopmentIsEnvironmentNotAllowed() throws {
        expectReason(.environmentNotAllowed, try Self.attest(try Self.deviceCheck("attestation"), allowed: [.production]))
        let worldcoin = try #require(try AttestationCase.worldcoin().first)
        expectReason(.environmentNotAllowed) { () throws(VerificationError) in
            do { _ = try worldcoin.verify(allowed: [.production]) } catch let e as VerificationError { throw e } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test func worldcoinProductionAppIdIsAppIdMismatch() throws {
        for item in try AttestationCase.worldcoin() {
            #expect(throws: VerificationError.self) { try item.verify(appId: "35RXKB6738.org.worldcoin.insight") }
            do { _ = try item.verify(appId: "35RXKB6738.org.worldcoin.insight") } catch let e as VerificationError {
                #expect(e.reason == .appIdMismatch)
            }
        }
    }

    @Test func apple2026SampleMutations() throws {
        let item = AttestationCase.apple2026
        func reason(_ body: () throws -> VerifiedAttestation) -> ReasonToken? {
            do { _ = try body(); return nil } catch let e as VerificationError { return e.reason } catch { return nil }
        }
        #expect(reason { try item.verify(clientDataHash: Vectors.sha256("example_server_challenge")) } == .nonceMismatch)
        #expect(reason { try item.verify(appId: "0987654321.com.example.myapp") } == .appIdMismatch)
        #expect(reason { try item.verify(appId: "1234567890.tech.malibu.app") } == .appIdMismatch)
        #expect(reason { try item.verify(at: try Vectors.time("2026-04-24T00:00:00Z")) } == .certChainInvalid)
        #expect(reason { try item.verify(keyId: Vectors.sha256("other")) } == .keyIdMismatch)
        #expect(reason { try item.verify(allowed: [.development]) } == .environmentNotAllowed)
    }

    @Test func rootInsideX5cIsNeverTrusted() throws {
        // Trusting nothing but an unrelated anchor: even with the real intermediate
        // in x5c the chain must not verify.
        let doc = try Self.deviceCheck("attestation")
        let verifier = AttestationVerifier(anchors: .appleRootG3, receiptAnchors: .appleRootG3)
        expectReason(.certChainInvalid, try Self.attest(doc, verifier: verifier))
    }

    // MARK: assertions

    @Test func replayedCounterIsCounterReplay() throws {
        let item = try #require(try AssertionCase.worldcoin().first { $0.name.contains("2024-08") })
        func reason(_ previous: UInt32?) -> ReasonToken? {
            do { _ = try item.verify(previousCounter: previous); return nil } catch let e as VerificationError {
                return e.reason
            } catch { return nil }
        }
        #expect(reason(1) == .counterReplay)
        #expect(reason(5) == .counterReplay)
        #expect(reason(0) == nil)
        #expect(reason(nil) == nil)
        #expect(throws: VerificationError.counterReplay("counter 3 is not above 10")) {
            try AssertionCase.basD.verify(previousCounter: 10)
        }
        for item in AssertionCase.fixed {
            #expect(throws: VerificationError.self) { try item.verify(previousCounter: item.counter) }
        }
    }

    @Test func wrongPayloadIsBadSignature() throws {
        let item = try #require(try AssertionCase.worldcoin().first { $0.name.contains("2024-08") })
        #expect(throws: VerificationError.badSignature("assertion signature does not verify with the attested key")) {
            try item.verify(clientDataHash: Vectors.sha256("not_the_hash_i_expect"))
        }
        #expect(throws: VerificationError.badSignature("assertion signature does not verify with the attested key")) {
            try AssertionCase.uebelack.verify(clientDataHash: Vectors.sha256("{}"))
        }
    }

    @Test func wrongKeyIsBadSignature() throws {
        let doc = try Self.deviceCheck("assertion")
        let other = try Self.deviceCheck("assertion", file: "ios-14.2")
        let bytes = try Vectors.base64(try #require(doc.string("assertionBase64")))
        let wrongKey = try P256PublicKey(pem: try #require(other.string("publicKey")))
        expectReason(.badSignature) { () throws(VerificationError) in
            _ = try AssertionVerifier.verifyAssertion(
                bytes, publicKey: wrongKey, appId: Self.dc, clientDataHash: Vectors.sha256("wurzelpfropf"),
                previousCounter: 0)
        }
    }

    @Test func assertionForAnotherAppIsAppIdMismatch() throws {
        #expect(throws: VerificationError.appIdMismatch("rpIdHash is not the hash of junk_app_id")) {
            try AssertionCase.srinivas.verify(appId: "junk_app_id")
        }
    }

    @Test func junkAssertionIsMalformed() {
        expectReason(.malformedAssertion) { () throws(VerificationError) in
            _ = try ParsedAssertion.parse(Array("junk data".utf8))
        }
    }
}
