/// The key access-control policy of an App Attest key (risk.md §1): the
/// credential certificate's extension 1.2.840.113635.100.8.6, classified
/// against the bytes Apple documents for macOS 27+ keys that require Full
/// Security mode and System Integrity Protection.
public enum KeyPolicy: String, Sendable, Hashable, CaseIterable {
    case macosFullSecurity = "macos-full-security"
    case other

    /// The extnValue octets of the enforced macOS policy (72 bytes; the inner
    /// 66 are the base64 `MEAMAjEx…` value of Apple's "Validating apps that
    /// connect to your server").
    public static let macOSFullSecurityBytes: [UInt8] = [
        0x30, 0x46, 0xa3, 0x44, 0x04, 0x42, 0x30, 0x40, 0x0c, 0x02, 0x31, 0x31, 0x30, 0x3a, 0x30, 0x09,
        0x0c, 0x02, 0x6f, 0x6b, 0xa1, 0x03, 0x01, 0x01, 0xff, 0x30, 0x09, 0x0c, 0x02, 0x6f, 0x61, 0xa1,
        0x03, 0x01, 0x01, 0xff, 0x30, 0x0b, 0x0c, 0x04, 0x6f, 0x64, 0x65, 0x6c, 0xa1, 0x03, 0x01, 0x01,
        0xff, 0x30, 0x15, 0x0c, 0x04, 0x6f, 0x73, 0x67, 0x6e, 0xa0, 0x06, 0x0c, 0x04, 0x72, 0x73, 0x65,
        0x63, 0x30, 0x05, 0xa6, 0x03, 0x02, 0x01, 0x01,
    ]

    /// Equal to Apple's bytes → `macosFullSecurity`; present and different →
    /// `other`; no extension → nil. Not secret: a plain comparison.
    public static func classify(aclBlob: [UInt8]?) -> KeyPolicy? {
        guard let aclBlob else { return nil }
        return aclBlob == macOSFullSecurityBytes ? .macosFullSecurity : .other
    }
}
