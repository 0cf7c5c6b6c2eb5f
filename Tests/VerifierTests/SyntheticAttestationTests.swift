import Testing
import Verifier

/// Steps that real data cannot reach (the nonce covers authData): a test PKI
/// signs attestations with one field altered at a time.
@Suite struct SyntheticAttestationTests {
    let pki = TestPKI()

    func verify(_ a: TestPKI.Attestation, allowed: Set<AppAttestEnvironment> = [.development]) throws
        -> () throws(VerificationError) -> VerifiedAttestation
    {
        let built = pki.build(a)
        let verifier = try pki.verifier
        return { () throws(VerificationError) in
            try verifier.verify(
                attestationObject: built.object, keyId: built.keyId, clientDataHash: TestPKI.clientDataHash,
                allowedApps: [TestPKI.appId: allowed], at: TestPKI.t0)
        }
    }

    func expect(_ reason: ReasonToken, _ a: TestPKI.Attestation, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let run = try verify(a)
        expectReason(reason, sourceLocation: sourceLocation) { () throws(VerificationError) in _ = try run() }
    }

    @Test func unalteredSyntheticAttestationVerifies() throws {
        let a = TestPKI.Attestation()
        let result = try verify(a)()
        #expect(result.publicKey == a.key.point)
        #expect(result.environment == .development)
        #expect(result.receipt.creationTime.unixSeconds == TestPKI.t0 + 1)
        #expect(result.receipt.creationTime.nanoseconds == 500_000_000)
        #expect(result.receipt.expirationTime != nil)
    }

    @Test func productionAAGUID() throws {
        var a = TestPKI.Attestation()
        a.aaguid = Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 0]
        #expect(try verify(a, allowed: [.production])().environment == .production)
    }

    @Test func nonZeroCounter() throws {
        var a = TestPKI.Attestation()
        a.counter = 1
        try expect(.counterNotZero, a)
    }

    @Test func unknownAAGUID() throws {
        var a = TestPKI.Attestation()
        a.aaguid = Array("appattestdevelo!".utf8)
        try expect(.aaguidMismatch, a)
        a.aaguid = Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 1]
        try expect(.aaguidMismatch, a)
    }

    @Test func wrongCredentialId() throws {
        var a = TestPKI.Attestation()
        a.credentialId = SHA256.hash(Array("other".utf8))
        try expect(.credentialIdMismatch, a)
        a.credentialId = [1, 2, 3]
        try expect(.credentialIdMismatch, a)
    }

    @Test func coseKeyNotP256OrNotTheLeafKey() throws {
        var a = TestPKI.Attestation()
        a.coseKey = TestCBOR.coseKey(a.key.point, crv: 2)
        try expect(.credentialKeyMismatch, a)
        a.coseKey = TestCBOR.coseKey(TestKey().point)
        try expect(.credentialKeyMismatch, a)
        a.coseKey = .map([(.uint(1), .uint(2))])
        try expect(.credentialKeyMismatch, a)
    }

    @Test func extensionMapAfterCOSEKeyWithEDClear() throws {
        var a = TestPKI.Attestation()
        a.extensions = TestCBOR.map([
            (.text("apple_bundle_version_01"), .text("42")), (.text("apple_validation_category_01"), .bytes([2, 0, 0, 0])),
            (.text("x_unknown"), .uint(7)),
        ]).encoded
        let result = try verify(a)()
        #expect(result.extensions.bundleVersion == "42")
        #expect(result.extensions.validationCategory == [2, 0, 0, 0])
        #expect(result.extensions.entries.count == 3)
    }

    @Test func trailingGarbageAfterExtensionsIsMalformed() throws {
        var a = TestPKI.Attestation()
        a.extensions = TestCBOR.map([]).encoded + [0x00]
        try expect(.malformedAttestation, a)
    }

    @Test func receiptProblems() throws {
        var a = TestPKI.Attestation()
        a.includeReceipt = false
        try expect(.receiptInvalid, a)
        a = TestPKI.Attestation()
        a.receiptAppId = "ABCDE12345.com.example.other"
        try expect(.receiptInvalid, a)
        a = TestPKI.Attestation()
        a.receiptSigner = TestCert(
            subject: "Self-signed receipt signer", issuer: nil, key: TestKey(), isCA: false,
            notBefore: TestPKI.t0 - 3600, notAfter: TestPKI.t0 + 3600)
        try expect(.receiptInvalid, a)
    }

    /// The receipt is not covered by the nonce, so its content is checked on
    /// its own: the attestation's kind, made before now, a first refresh
    /// within its life.
    @Test func theReceiptIsTheAttestationsOwn() throws {
        var a = TestPKI.Attestation()
        a.receiptKind = "RECEIPT"
        try expect(.receiptInvalid, a)
        a = TestPKI.Attestation()
        a.receiptCreation = "2023-11-20T22:13:21Z"  // after the credential certificate's end (t0 + 3 days)
        try expect(.receiptInvalid, a)
        a.receiptCreation = "2023-11-15T22:13:21Z"  // within it: Apple's clock, not the gateway's
        #expect(try verify(a)().receipt.creationTime.unixSeconds == TestPKI.t0 + 86_401)
        a = TestPKI.Attestation()
        a.receiptNotBefore = "2024-12-01T00:00:00Z"  // a year on: the fraud metric would never be asked for
        try expect(.receiptInvalid, a)
        a = TestPKI.Attestation()
        a.receiptNotBefore = "2023-11-15T22:13:21Z"  // Apple's: a day after creation
        #expect(try verify(a)().receipt.notBefore != nil)
    }

    /// Apple Root CA – G3 also anchors developer certificates: a receipt
    /// chaining to it must be signed by Apple's receipt signer, issued by an
    /// Application Integration CA. The same names under a test root stand
    /// in for Apple's (the rule is what the anchors demand).
    @Test func underAppleRootG3OnlyApplesReceiptSignerCounts() throws {
        #expect(TrustAnchors.appleRootG3.requiresAppleReceiptSigner)
        #expect(try !TrustAnchors(pem: pki.receiptRoot.pem).requiresAppleReceiptSigner)
        var strict = try TrustAnchors(pem: pki.receiptRoot.pem)
        strict.requiresAppleReceiptSigner = true
        let verifier = AttestationVerifier(anchors: try TrustAnchors(pem: pki.root.pem), receiptAnchors: strict)
        func run(_ a: TestPKI.Attestation) throws(VerificationError) {
            let built = pki.build(a)
            _ = try verifier.verify(
                attestationObject: built.object, keyId: built.keyId, clientDataHash: TestPKI.clientDataHash,
                allowedApps: [TestPKI.appId: [.development]], at: TestPKI.t0)
        }
        func chain(_ caName: String, _ signerName: String) -> (TestCert, TestCert) {
            let ca = TestCert(subject: caName, issuer: pki.receiptRoot, key: TestKey(), isCA: true,
                              notBefore: TestPKI.t0 - 86_400, notAfter: TestPKI.t0 + 86_400)
            let signer = TestCert(subject: signerName, issuer: ca, key: TestKey(), isCA: false,
                                  notBefore: TestPKI.t0 - 86_400, notAfter: TestPKI.t0 + 86_400)
            return (ca, signer)
        }
        // Apple's names: accepted.
        var a = TestPKI.Attestation()
        let (apple, appleSigner) = chain("Apple Application Integration CA 5 - G1", "Application Attestation Fraud Receipt Signing")
        a.receiptSigner = appleSigner
        a.receiptExtra = [apple]
        try run(a)
        // Any other signer under the root (a developer's certificate): refused.
        a = TestPKI.Attestation()
        expectReason(.receiptInvalid) { () throws(VerificationError) in try run(a) }
        // Apple's signer name from another CA: refused.
        let (developer, impostor) = chain("Apple Worldwide Developer Relations Certification Authority", "Application Attestation Fraud Receipt Signing")
        a.receiptSigner = impostor
        a.receiptExtra = [developer]
        expectReason(.receiptInvalid) { () throws(VerificationError) in try run(a) }
    }

    @Test func wrongFormat() throws {
        var a = TestPKI.Attestation()
        a.fmt = "packed"
        try expect(.unsupportedFormat, a)
    }

    @Test func rootInsideX5cIsOnlyAnUntrustedIntermediate() throws {
        var a = TestPKI.Attestation()
        a.includeRootInX5c = true
        // Trusted by the configured anchor: fine.
        _ = try verify(a)()
        // Not configured as an anchor: its presence in x5c must not help.
        let built = pki.build(a)
        expectReason(.certChainInvalid) { () throws(VerificationError) in
            _ = try AttestationVerifier().verify(
                attestationObject: built.object, keyId: built.keyId, clientDataHash: TestPKI.clientDataHash,
                allowedApps: [TestPKI.appId: [.development]], at: TestPKI.t0)
        }
    }

    @Test func duplicateKeyIndefiniteLengthAndTrailingBytesAreMalformed() throws {
        let built = pki.build(TestPKI.Attestation())
        let verifier = try pki.verifier
        func run(_ bytes: [UInt8]) -> () throws(VerificationError) -> Void {
            { () throws(VerificationError) in
                _ = try verifier.verify(
                    attestationObject: bytes, keyId: built.keyId, clientDataHash: TestPKI.clientDataHash,
                    allowedApps: [TestPKI.appId: [.development]], at: TestPKI.t0)
            }
        }
        expectReason(.malformedAttestation, run(built.object + [0x00]))
        // Map of 3 → map of 4 with "fmt" repeated.
        var duplicate = built.object
        duplicate[0] = 0xa4
        duplicate += TestCBOR.text("fmt").encoded + TestCBOR.text("apple-appattest").encoded
        expectReason(.malformedAttestation, run(duplicate))
        var indefinite = built.object
        indefinite[0] = 0xbf
        indefinite.append(0xff)
        expectReason(.malformedAttestation, run(indefinite))
    }

    @Test func syntheticAssertionRoundTrip() throws {
        let key = TestKey()
        let publicKey = try P256PublicKey(point: key.point)
        let authData = SHA256.hash(Array(TestPKI.appId.utf8)) + [0x40, 0, 0, 0, 9]
        let cdh = SHA256.hash(Array("request".utf8))
        let signature = key.sign(SHA256.hash(authData + cdh))
        let object = TestCBOR.map([(.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authData))])
        let parsed = try ParsedAssertion.parse(object.encoded)
        let verified = try parsed.verify(
            publicKey: publicKey, appId: TestPKI.appId, clientDataHash: cdh, previousCounter: 8)
        #expect(verified.counter == 9)
        expectReason(.counterReplay) { () throws(VerificationError) in
            _ = try parsed.verify(publicKey: publicKey, appId: TestPKI.appId, clientDataHash: cdh, previousCounter: 9)
        }
        // iOS 27 style extension map after the 37 bytes.
        let ext = TestCBOR.map([(.text("apple_bundle_version_01"), .text("3"))]).encoded
        let signature2 = key.sign(SHA256.hash(authData + ext + cdh))
        let object2 = TestCBOR.map([(.text("signature"), .bytes(signature2)), (.text("authenticatorData"), .bytes(authData + ext))])
        let verified2 = try AssertionVerifier.verifyAssertion(
            object2.encoded, publicKey: publicKey, appId: TestPKI.appId, clientDataHash: cdh, previousCounter: nil)
        #expect(verified2.extensions.bundleVersion == "3")
    }

    @Test func nonDERSignatureIsMalformedAssertion() throws {
        let authData = [UInt8](repeating: 0, count: 37)
        for signature: [UInt8] in [[], [0x30, 0x00], [0x30, 0x06, 0x02, 0x01, 0x80, 0x02, 0x01, 0x01], Array(repeating: 1, count: 64)] {
            let object = TestCBOR.map([(.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authData))])
            expectReason(.malformedAssertion) { () throws(VerificationError) in _ = try ParsedAssertion.parse(object.encoded) }
        }
        let short = TestCBOR.map([(.text("signature"), .bytes([0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01])), (.text("authenticatorData"), .bytes([1, 2, 3]))])
        expectReason(.malformedAssertion) { () throws(VerificationError) in _ = try ParsedAssertion.parse(short.encoded) }
    }
}
