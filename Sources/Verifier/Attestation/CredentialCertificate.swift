import SwiftASN1

/// The App Attest extensions of the credential (leaf) certificate.
enum CredentialCertificate {
    static let nonceOID = "1.2.840.113635.100.8.2"
    static let aclBlobOID = "1.2.840.113635.100.8.6"

    /// The 32-byte nonce in `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
    static func nonce(_ leaf: X509Certificate) -> [UInt8]? {
        leaf.extensionValue(oid: nonceOID).flatMap(nonce(extensionValue:))
    }

    /// The same from the extension's value bytes (also what the fuzz target feeds).
    static func nonce(extensionValue value: [UInt8]) -> [UInt8]? {
        guard let root = try? DER.parse(value), root.identifier == .sequence,
            case .constructed(let children) = root.content
        else { return nil }
        var outer = children.makeIterator()
        guard let tagged = outer.next(), outer.next() == nil,
            tagged.identifier == ASN1Identifier(tagWithNumber: 1, tagClass: .contextSpecific),
            case .constructed(let inner) = tagged.content
        else { return nil }
        var innerIterator = inner.makeIterator()
        guard let octets = innerIterator.next(), innerIterator.next() == nil,
            let string = try? ASN1OctetString(derEncoded: octets), string.bytes.count == 32
        else { return nil }
        return Array(string.bytes)
    }

    /// The key access-control policy ("ACL blob"), kept as raw extension bytes.
    static func aclBlob(_ leaf: X509Certificate) -> [UInt8]? {
        leaf.extensionValue(oid: aclBlobOID)
    }
}
