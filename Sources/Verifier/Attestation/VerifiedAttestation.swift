/// What a successful attestation establishes.
public struct VerifiedAttestation: Sendable, Hashable {
    /// The attested key as an uncompressed P-256 point (65 bytes).
    public var publicKey: [UInt8]
    /// SHA-256 of `publicKey` (32 bytes).
    public var keyId: [UInt8]
    /// The allowed App ID whose hash matched rpIdHash.
    public var appId: String
    public var environment: AppAttestEnvironment
    /// The verified receipt embedded in the attestation.
    public var receipt: Receipt
    /// The receipt as received, to store for later refreshes.
    public var receiptBytes: [UInt8]
    public var extensions: AuthenticatorExtensions
    /// The leaf's 1.2.840.113635.100.8.6 extension value, when present.
    public var aclBlob: [UInt8]?
    /// `aclBlob` classified against Apple's macOS policy bytes (risk.md §1).
    public var keyPolicy: KeyPolicy? { KeyPolicy.classify(aclBlob: aclBlob) }
    /// Always 0 for an accepted attestation.
    public var counter: UInt32
}
