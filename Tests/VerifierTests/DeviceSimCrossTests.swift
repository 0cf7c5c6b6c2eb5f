import DeviceSim
import Testing
import Verifier

/// DeviceSim and the Verifier share no code: each unmodified DeviceSim object
/// must verify, and each mutation must fail with exactly the reason token it
/// was built to produce.
@Suite struct DeviceSimCrossTests {
    static let appId = "ABCDE12345.com.example.app"
    static let at: Int64 = 1_790_000_000

    struct Fixture {
        let device: SimDevice
        let verifier: AttestationVerifier
    }

    static func fixture() throws -> Fixture {
        let ca = try TestCA()
        let receiptCA = try ReceiptCA()
        let device = try SimDevice(ca: ca, receiptCA: receiptCA)
        let verifier = AttestationVerifier(
            anchors: try TrustAnchors(pem: ca.rootPEM), receiptAnchors: try TrustAnchors(pem: receiptCA.rootPEM),
            clockSkewSeconds: 60)
        return Fixture(device: device, verifier: verifier)
    }

    static let clientDataHash = SHA256.hash(Array("assertgate-attest-v1\nchallenge\n".utf8))

    static func verify(
        _ f: Fixture, _ object: [UInt8], environments: Set<AppAttestEnvironment> = [.development, .production]
    ) -> Result<VerifiedAttestation, VerificationError> {
        Result { () throws(VerificationError) in
            try f.verifier.verify(
                attestationObject: object, keyId: f.device.keyId, clientDataHash: clientDataHash,
                allowedApps: [appId: environments], at: at)
        }
    }

    @Test(arguments: [AttestationEnvironment.development, .production])
    func unmodifiedAttestationVerifies(environment: AttestationEnvironment) throws {
        let f = try Self.fixture()
        let object = try f.device.attest(
            clientDataHash: Self.clientDataHash, appId: Self.appId, environment: environment, at: Self.at,
            options: AttestationOptions(extensions: AuthenticatorExtensions(bundleVersion: "7", validationCategory: [1, 0])))
        let verified = try Self.verify(f, object).get()
        #expect(verified.publicKey == f.device.publicKey)
        #expect(verified.environment.rawValue == environment.rawValue)
        #expect(verified.appId == Self.appId)
        #expect(verified.extensions.bundleVersion == "7")
        #expect(verified.extensions.validationCategory == [1, 0])
        #expect(verified.receipt.kind == .attest)
    }

    /// risk.md §1: the category as a CBOR integer verifies (it failed whole
    /// before); DeviceSim's macOS policy bytes, written independently, are
    /// classified `macos-full-security`, any other policy `other`.
    @Test func signalsOfBothCategoryFormsAndKeyPolicies() throws {
        let f = try Self.fixture()
        let cases: [(DeviceSim.AuthenticatorExtensions, SimKeyPolicy?, UInt32?, KeyPolicy?)] = [
            (.launch(category: 4, asInteger: true, bundleVersion: "2.1"), .macosFullSecurity, 4, .macosFullSecurity),
            (.launch(category: 2, bundleVersion: "2.1"), .other, 2, .other),
            (DeviceSim.AuthenticatorExtensions(bundleVersion: "2.1", validationCategory: [2, 0]), nil, nil, nil),
        ]
        for (extensions, policy, category, keyPolicy) in cases {
            let object = try f.device.attest(
                clientDataHash: Self.clientDataHash, appId: Self.appId, at: Self.at,
                options: AttestationOptions(extensions: extensions, aclBlob: policy?.aclBlob))
            let verified = try Self.verify(f, object).get()
            #expect(verified.extensions.launchCategory == category)
            #expect(verified.extensions.bundleVersion == "2.1")
            #expect(verified.keyPolicy == keyPolicy)
        }
        #expect(SimKeyPolicy.macOSFullSecurityBytes == KeyPolicy.macOSFullSecurityBytes)
    }

    @Test(arguments: AttestationMutation.allCases)
    func attestationMutationFailsWithItsReason(mutation: AttestationMutation) throws {
        let f = try Self.fixture()
        let object = try f.device.attest(
            clientDataHash: Self.clientDataHash, appId: Self.appId, at: Self.at, mutation: mutation)
        switch Self.verify(f, object) {
        case .success:
            Issue.record("\(mutation) verified")
        case .failure(let error):
            #expect(error.reason.rawValue == mutation.expectedReason, "\(mutation): \(error)")
        }
    }

    @Test func developmentKeyRefusedWhereOnlyProductionIsAllowed() throws {
        let f = try Self.fixture()
        let object = try f.device.attest(clientDataHash: Self.clientDataHash, appId: Self.appId, at: Self.at)
        #expect(Self.verify(f, object, environments: [.production]).failureReason == .environmentNotAllowed)
    }

    @Test func unmodifiedAssertionVerifiesAndCountersAreChecked() throws {
        let f = try Self.fixture()
        let key = try P256PublicKey(point: f.device.publicKey)
        let hash = SHA256.hash(Array("assertgate-assert-v1\nGET\n/x\n\nUNSIGNED-PAYLOAD".utf8))
        let object = try f.device.assert(clientDataHash: hash, appId: Self.appId, counter: 5)
        let ok = try AssertionVerifier.verifyAssertion(
            object, publicKey: key, appId: Self.appId, clientDataHash: hash, previousCounter: 4)
        #expect(ok.counter == 5)
        #expect(throws: VerificationError.self) {
            try AssertionVerifier.verifyAssertion(
                object, publicKey: key, appId: Self.appId, clientDataHash: hash, previousCounter: 5)
        }
    }

    @Test(arguments: AssertionMutation.allCases)
    func assertionMutationFailsWithItsReason(mutation: AssertionMutation) throws {
        let f = try Self.fixture()
        let key = try P256PublicKey(point: f.device.publicKey)
        let hash = SHA256.hash(Array("client data".utf8))
        let object = try f.device.assert(clientDataHash: hash, appId: Self.appId, counter: 1, mutation: mutation)
        let result = Result { () throws(VerificationError) in
            try AssertionVerifier.verifyAssertion(
                object, publicKey: key, appId: Self.appId, clientDataHash: hash, previousCounter: 0)
        }
        #expect(result.failureReason?.rawValue == mutation.expectedReason)
    }
}

extension Result where Failure == VerificationError {
    var failureReason: ReasonToken? {
        if case .failure(let e) = self { return e.reason }
        return nil
    }
}
