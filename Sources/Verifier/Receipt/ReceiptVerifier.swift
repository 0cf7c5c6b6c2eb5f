/// Verifies App Attest receipts: the one inside an attestation and the
/// refreshed ones Apple's `attestationData` endpoint returns.
public enum ReceiptVerifier {
    /// Verifies the PKCS#7 signature and its chain to `anchors` at the
    /// receipt's own creation time (± `clockSkew` seconds), then parses the
    /// payload. Every failure is `receiptInvalid`.
    public static func verify(
        receipt bytes: [UInt8], anchors: TrustAnchors = .appleRootG3, clockSkew: Int64 = 60
    ) throws(VerificationError) -> Receipt {
        guard let signed = PKCS7SignedData(der: bytes) else {
            throw .receiptInvalid("receipt is not a PKCS#7 SignedData of at most \(PKCS7SignedData.maxSize) bytes")
        }
        guard signed.signerCount == 1, let signer = signed.signer() else {
            throw .receiptInvalid("receipt must have exactly one signer with its certificate")
        }
        guard let content = signed.verifiedContent() else {
            throw .receiptInvalid("receipt signature does not verify")
        }
        let receipt: Receipt
        switch ReceiptPayload.parse(content) {
        case .success(let parsed): receipt = parsed
        case .failure(let error): throw .receiptInvalid("receipt payload: \(error.message)")
        }
        let intermediates = signed.certificates()
        if let error = anchors.store.verify(
            leaf: signer, untrusted: intermediates, at: receipt.creationTime.unixSeconds, skew: clockSkew)
        {
            throw .receiptInvalid("receipt signer chain at \(receipt.creationTime): \(error)")
        }
        if anchors.requiresAppleReceiptSigner {
            // Apple Root CA – G3 also anchors developer certificates (their keys
            // are developers'): only Apple's receipt signer, issued by one of
            // its Application Integration CAs, may sign a receipt.
            let subject = signer.commonName() ?? ""
            let issuer = signer.commonName(ofIssuer: true) ?? ""
            guard subject == Self.appleSignerName, issuer.hasPrefix(Self.appleSignerIssuerPrefix) else {
                throw .receiptInvalid("receipt is not signed by Apple's receipt signer (signer \"\(subject)\", issued by \"\(issuer)\")")
            }
        }
        return receipt
    }

    /// The subject of Apple's receipt-signing certificate, and its issuer's
    /// (Apple Application Integration CA 5 – G1 in every receipt seen since 2021).
    static let appleSignerName = "Application Attestation Fraud Receipt Signing"
    static let appleSignerIssuerPrefix = "Apple Application Integration CA"

    /// As `verify(receipt:anchors:clockSkew:)`, and the receipt must name
    /// `appId` and the attested key `publicKey` (65-byte point).
    public static func verify(
        receipt bytes: [UInt8], appId: String, publicKey: [UInt8], anchors: TrustAnchors = .appleRootG3,
        clockSkew: Int64 = 60
    ) throws(VerificationError) -> Receipt {
        let receipt = try verify(receipt: bytes, anchors: anchors, clockSkew: clockSkew)
        guard receipt.appId == appId else {
            throw .receiptInvalid("receipt names App ID \(receipt.appId), expected \(appId)")
        }
        guard receipt.attestedPublicKey == publicKey else {
            throw .receiptInvalid("receipt names a different attested public key")
        }
        return receipt
    }
}
