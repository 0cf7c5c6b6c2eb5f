/// Verifies App Attest attestation objects (app-attest.md §2). Pure: the
/// verification time is an input. Safe to share across threads.
public struct AttestationVerifier: Sendable {
    public let anchors: TrustAnchors
    public let receiptAnchors: TrustAnchors
    public let clockSkewSeconds: Int64

    public init(
        anchors: TrustAnchors = .appleAppAttestation, receiptAnchors: TrustAnchors = .appleRootG3,
        clockSkewSeconds: Int64 = 60
    ) {
        self.anchors = anchors
        self.receiptAnchors = receiptAnchors
        self.clockSkewSeconds = max(0, clockSkewSeconds)
    }

    /// Apple's receipts may be refreshed a day after creation and expire
    /// after about 90 days: a later first refresh is not Apple's.
    static let maxReceiptRefreshDelay: Int64 = 100 * 86_400

    /// Runs every step of app-attest.md §2 in order; the first failing step
    /// decides the error.
    /// - Parameters:
    ///   - keyId: the key ID the app sent (32 bytes, already base64-decoded).
    ///   - clientDataHash: any length (Apple's samples pass raw challenges).
    ///   - allowedApps: App ID → environments accepted for it.
    ///   - time: verification time in Unix seconds.
    public func verify(
        attestationObject: [UInt8], keyId: [UInt8], clientDataHash: [UInt8],
        allowedApps: [String: Set<AppAttestEnvironment>], at time: Int64
    ) throws(VerificationError) -> VerifiedAttestation {
        // 1. Decode, fmt.
        let object = try AttestationObject.parse(attestationObject)
        let authData = object.authenticatorData
        guard let credential = authData.attestedCredential else {
            throw .malformedAttestation("authData has no attested credential data")
        }

        // 2. Chain to the configured anchors only.
        var certificates: [X509Certificate] = []
        for (index, der) in object.certificates.enumerated() {
            guard let cert = X509Certificate(der: der) else {
                throw .certChainInvalid("x5c[\(index)] is not a DER certificate")
            }
            certificates.append(cert)
        }
        let leaf = certificates[0]
        if let error = anchors.store.verify(
            leaf: leaf, untrusted: Array(certificates.dropFirst()), at: time, skew: clockSkewSeconds)
        {
            throw .certChainInvalid("credential certificate chain: \(error)")
        }

        // 3. Nonce.
        guard let certificateNonce = CredentialCertificate.nonce(leaf) else {
            throw .nonceMismatch("credential certificate has no valid nonce extension")
        }
        let nonce = SHA256.hash(authData.raw, clientDataHash)
        guard ConstantTime.equal(nonce, certificateNonce) else {
            throw .nonceMismatch("H(authData ‖ clientDataHash) differs from the certificate nonce")
        }

        // 4. keyId = H(leaf point), point as fixed 32-byte coordinates.
        guard let point = leaf.p256PublicKeyPoint else {
            throw .keyIdMismatch("credential certificate key is not a P-256 key")
        }
        let computedKeyId = SHA256.hash(point)
        guard ConstantTime.equal(computedKeyId, keyId) else {
            throw .keyIdMismatch("key ID is not the SHA-256 of the credential certificate's public key")
        }

        // 5. rpIdHash = H(App ID) of an allowed App ID.
        guard
            let appId = allowedApps.keys.sorted().first(where: {
                ConstantTime.equal(SHA256.hash($0), authData.rpIdHash)
            })
        else {
            throw .appIdMismatch("rpIdHash matches none of the allowed App IDs")
        }

        // 6. Counter.
        guard authData.counter == 0 else {
            throw .counterNotZero("attestation counter is \(authData.counter)")
        }

        // 7. Environment from the aaguid.
        guard let environment = AppAttestEnvironment(aaguid: credential.aaguid) else {
            throw .aaguidMismatch("aaguid is neither appattestdevelop nor appattest")
        }
        guard allowedApps[appId, default: []].contains(environment) else {
            throw .environmentNotAllowed("\(environment.rawValue) is not allowed for \(appId)")
        }

        // 8. credentialId = keyId.
        guard ConstantTime.equal(credential.credentialId, computedKeyId) else {
            throw .credentialIdMismatch("credentialId differs from the key ID")
        }

        // 9. COSE key: P-256 and the leaf's point.
        switch COSEKey.p256Point(credential.publicKey) {
        case .failure(let error):
            throw .credentialKeyMismatch(error.message)
        case .success(let cosePoint):
            guard cosePoint == point else {
                throw .credentialKeyMismatch("COSE key differs from the credential certificate's key")
            }
        }

        // 10. Receipt, verified at its own creation time.
        guard let receiptBytes = object.receipt, !receiptBytes.isEmpty else {
            throw .receiptInvalid("attestation has no receipt")
        }
        let receipt = try ReceiptVerifier.verify(
            receipt: receiptBytes, appId: appId, publicKey: point, anchors: receiptAnchors,
            clockSkew: clockSkewSeconds)
        // The receipt is not covered by the attestation's nonce: the client
        // could swap it. It must be the attestation's own kind, made while the
        // credential certificate was valid (a few days from the attestation;
        // its age is what the upstream reads), with no refresh time beyond its
        // life (it decides when the key's fraud metric is first asked for).
        guard receipt.kind == .attest else {
            throw .receiptInvalid("an attestation's receipt must be of type ATTEST, not \(receipt.kind.rawValue)")
        }
        guard let leafEnd = leaf.notAfterUnixSeconds, receipt.creationTime.unixSeconds <= leafEnd + clockSkewSeconds else {
            throw .receiptInvalid("receipt created at \(receipt.creationTime), after its credential certificate expired")
        }
        if let notBefore = receipt.notBefore,
            notBefore.unixSeconds > receipt.creationTime.unixSeconds + Self.maxReceiptRefreshDelay
        {
            throw .receiptInvalid("receipt not before \(notBefore), over 100 days after its creation")
        }

        return VerifiedAttestation(
            publicKey: point, keyId: computedKeyId, appId: appId, environment: environment,
            receipt: receipt, receiptBytes: receiptBytes, extensions: authData.extensions,
            aclBlob: CredentialCertificate.aclBlob(leaf), counter: authData.counter)
    }
}
