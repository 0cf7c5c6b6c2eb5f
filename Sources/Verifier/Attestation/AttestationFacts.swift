/// What an attestation object says about itself, read without verifying
/// anything: for the offline CLI to print next to a failure ("what was
/// learned", cli.md), so a developer sees which environment, counter or key
/// the device sent. Never a basis for trust.
public struct AttestationFacts: Sendable {
    /// From the aaguid; nil when it is neither App Attest value.
    public var environment: AppAttestEnvironment?
    public var aaguidHex: String?
    public var counter: UInt32
    /// SHA-256 of the App ID the device used, hex.
    public var rpIdHashHex: String
    /// The credential id (what the key id should be), standard base64.
    public var credentialId: String?
    public var extensions: AuthenticatorExtensions
    public var certificateCount: Int
    public var hasReceipt: Bool

    /// Nil when the object does not even decode (the failure's reason says why).
    public static func read(attestationObject bytes: [UInt8]) -> AttestationFacts? {
        guard let object = try? AttestationObject.parse(bytes) else { return nil }
        let authData = object.authenticatorData
        let credential = authData.attestedCredential
        return AttestationFacts(
            environment: credential.flatMap { AppAttestEnvironment(aaguid: $0.aaguid) },
            aaguidHex: credential.map { Hex.encode($0.aaguid) }, counter: authData.counter,
            rpIdHashHex: Hex.encode(authData.rpIdHash), credentialId: credential.map { Base64.encode($0.credentialId) },
            extensions: authData.extensions, certificateCount: object.certificates.count,
            hasReceipt: object.receipt != nil)
    }
}
