/// Authenticator data (app-attest.md §1), parsed by length rather than by
/// the AT/ED flags: real devices set AT on assertions without credential data
/// and append extensions with ED clear.
public struct AuthenticatorData: Sendable, Hashable {
    public static let flagUserPresent: UInt8 = 0x01
    public static let flagUserVerified: UInt8 = 0x04
    public static let flagAttestedData: UInt8 = 0x40
    public static let flagExtensionData: UInt8 = 0x80

    /// The bytes as received (the signed/hashed form).
    public let raw: [UInt8]
    public let rpIdHash: [UInt8]
    public let flags: UInt8
    public let counter: UInt32
    /// Present for attestations only.
    public let attestedCredential: AttestedCredentialData?
    public let extensions: AuthenticatorExtensions

    static let fixedLength = 37

    /// Attestation form: 37 bytes, aaguid, credential ID, COSE key, then an
    /// optional extension map.
    public static func parseAttestation(_ bytes: [UInt8]) throws(AuthDataError) -> AuthenticatorData {
        let headerEnd = fixedLength + 16 + 2
        guard bytes.count >= headerEnd else { throw .tooShort(length: bytes.count, needed: headerEnd) }
        let aaguid = Array(bytes[37..<53])
        let idLength = Int(bytes[53]) << 8 | Int(bytes[54])
        guard idLength <= bytes.count - headerEnd else { throw .credentialIdLength(idLength) }
        let credentialId = Array(bytes[headerEnd..<headerEnd + idLength])
        let keyStart = headerEnd + idLength
        guard keyStart < bytes.count else { throw .tooShort(length: bytes.count, needed: keyStart + 1) }
        let key: CBORValue
        let keyEnd: Int
        do {
            (key, keyEnd) = try CBORDecoder(limits: .assertion).decodePrefix(bytes, range: keyStart..<bytes.count)
        } catch {
            throw .credentialKey(error)
        }
        let credential = AttestedCredentialData(
            aaguid: aaguid, credentialId: credentialId, publicKey: key,
            publicKeyBytes: Array(bytes[keyStart..<keyEnd]))
        let extensions = try AuthenticatorExtensions.parse(bytes, range: keyEnd..<bytes.count)
        return AuthenticatorData(bytes: bytes, credential: credential, extensions: extensions)
    }

    /// Assertion form: 37 bytes plus an optional extension map.
    public static func parseAssertion(_ bytes: [UInt8]) throws(AuthDataError) -> AuthenticatorData {
        guard bytes.count >= fixedLength else { throw .tooShort(length: bytes.count, needed: fixedLength) }
        let extensions = try AuthenticatorExtensions.parse(bytes, range: fixedLength..<bytes.count)
        return AuthenticatorData(bytes: bytes, credential: nil, extensions: extensions)
    }

    private init(bytes: [UInt8], credential: AttestedCredentialData?, extensions: AuthenticatorExtensions) {
        self.raw = bytes
        self.rpIdHash = Array(bytes[0..<32])
        self.flags = bytes[32]
        self.counter = UInt32(bytes[33]) << 24 | UInt32(bytes[34]) << 16 | UInt32(bytes[35]) << 8 | UInt32(bytes[36])
        self.attestedCredential = credential
        self.extensions = extensions
    }
}

/// The attested credential data of an attestation's authenticator data.
public struct AttestedCredentialData: Sendable, Hashable {
    public let aaguid: [UInt8]
    public let credentialId: [UInt8]
    /// The COSE_Key as decoded CBOR; interpreted by `COSEKey` (step 9).
    public let publicKey: CBORValue
    public let publicKeyBytes: [UInt8]
}
