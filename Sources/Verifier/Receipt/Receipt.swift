/// A verified App Attest receipt (app-attest.md §4).
public struct Receipt: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        /// The receipt embedded in an attestation.
        case attest = "ATTEST"
        /// A receipt returned by Apple's refresh endpoint.
        case receipt = "RECEIPT"
    }

    /// Field 2.
    public var appId: String
    /// Field 3: the attested key's credential certificate (DER).
    public var attestedCertificate: [UInt8]
    /// The public key of `attestedCertificate` as a 65-byte point.
    public var attestedPublicKey: [UInt8]
    /// Field 4 (not the clientDataHash in refreshed receipts: never compare it).
    public var clientHash: [UInt8]?
    /// Field 5.
    public var token: String?
    /// Field 6.
    public var kind: Kind
    /// Field 7: `sandbox` or `production` (undocumented).
    public var environment: String?
    /// Field 12.
    public var creationTime: RFC3339Time
    /// Field 17, refreshed receipts only.
    public var riskMetric: Int?
    /// Field 19.
    public var notBefore: RFC3339Time?
    /// Field 21.
    public var expirationTime: RFC3339Time?
}
