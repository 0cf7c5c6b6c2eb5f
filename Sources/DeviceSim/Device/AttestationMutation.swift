/// One way to break an attestation so that exactly one verifier step fails
/// (app-attest.md §2) and every earlier step still passes. `expectedReason`
/// is the protocol.md §5 reason token the verifier must answer with.
///
/// `environment-not-allowed` needs no mutation: attest with
/// `environment: .development` against a verifier that only allows production.
public enum AttestationMutation: String, CaseIterable, Sendable {
    /// Step 1: `fmt` is "wurzelpfropf".
    case wrongFormat
    /// Step 2: leaf and intermediate come from a fresh CA that is not configured.
    case untrustedChain
    /// Step 2: as `untrustedChain`, with that CA's self-signed root inside x5c
    /// (a root in x5c must be ignored, not trusted).
    case untrustedChainWithRoot
    /// Step 2: leaf validity ended 7 days before the attestation time.
    case expiredLeaf
    /// Step 3: the leaf's nonce extension holds H(nonce), not the nonce.
    case wrongNonce
    /// Step 4: the leaf certifies another key, so H(leaf key) ≠ the device's keyId
    /// (authData still names the device key; pass `device.keyId` to the verifier).
    case keyIdMismatch
    /// Step 5: rpIdHash is H("ZZZZZZZZZZ.org.example.other").
    case wrongAppId
    /// Step 6: counter is 1.
    case nonZeroCounter
    /// Step 7: aaguid is 16 random bytes (neither development nor production).
    case badAAGUID
    /// Step 8: credentialId is 32 random bytes.
    case credentialIdMismatch
    /// Step 9: the COSE key is another P-256 point.
    case coseKeyMismatch
    /// Step 9: the COSE key says crv 2 (P-384) with the device's coordinates.
    case coseKeyNotP256
    /// Step 10: attStmt has no "receipt" entry.
    case receiptMissing
    /// Step 10: the last byte of the receipt (the end of its ECDSA signature) is flipped.
    case receiptBadSignature
    /// Step 10: the receipt names another App ID.
    case receiptWrongAppId
    /// Step 10: the receipt's attested key is a credCert for another key.
    case receiptWrongKey
    /// Step 10: the receipt is signed by a fresh receipt CA that is not configured.
    case receiptUntrusted
    /// Decoding: the object is truncated by 7 bytes.
    case malformedCBOR
    /// Decoding: a CBOR null follows the top-level map.
    case trailingBytes
    /// Decoding: the top-level map uses indefinite length.
    case indefiniteLength
    /// Decoding: the top-level map has "fmt" twice.
    case duplicateKey

    /// The reason token (protocol.md §5) the verifier must produce.
    public var expectedReason: String {
        switch self {
        case .wrongFormat: return "unsupported-format"
        case .untrustedChain, .untrustedChainWithRoot, .expiredLeaf: return "cert-chain-invalid"
        case .wrongNonce: return "nonce-mismatch"
        case .keyIdMismatch: return "key-id-mismatch"
        case .wrongAppId: return "app-id-mismatch"
        case .nonZeroCounter: return "counter-not-zero"
        case .badAAGUID: return "aaguid-mismatch"
        case .credentialIdMismatch: return "credential-id-mismatch"
        case .coseKeyMismatch, .coseKeyNotP256: return "credential-key-mismatch"
        case .receiptMissing, .receiptBadSignature, .receiptWrongAppId, .receiptWrongKey, .receiptUntrusted:
            return "receipt-invalid"
        case .malformedCBOR, .trailingBytes, .indefiniteLength, .duplicateKey: return "malformed-attestation"
        }
    }
}

/// One way to break an assertion (app-attest.md §3, protocol.md §4).
/// `counter-replay` needs no mutation: the caller picks the counter.
public enum AssertionMutation: String, CaseIterable, Sendable {
    /// The signature covers H(authenticatorData ‖ clientDataHash ‖ 0x00), not the nonce.
    case badSignature
    /// rpIdHash is H("ZZZZZZZZZZ.org.example.other"); the signature is valid for it.
    case wrongAppId
    /// The object is truncated by 5 bytes.
    case malformedCBOR
    /// The signature is raw r ‖ s (64 bytes) instead of DER.
    case signatureNotDER

    public var expectedReason: String {
        switch self {
        case .badSignature: return "bad-signature"
        case .wrongAppId: return "app-id-mismatch"
        case .malformedCBOR, .signatureNotDER: return "malformed-assertion"
        }
    }
}
