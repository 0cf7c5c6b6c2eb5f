/// A structurally valid assertion object, before any cryptographic check.
/// Parse first (→ `malformed-assertion`), then look up the key, then `verify`.
public struct ParsedAssertion: Sendable, Hashable {
    public let signature: [UInt8]
    public let authenticatorData: AuthenticatorData

    /// Step 1 of app-attest.md §3: `{signature: DER ECDSA, authenticatorData: bytes}`.
    public static func parse(_ bytes: [UInt8]) throws(VerificationError) -> ParsedAssertion {
        let root: CBORValue
        do {
            root = try CBORDecoder(limits: .assertion).decode(bytes)
        } catch {
            throw .malformedAssertion("assertion object: \(error)")
        }
        guard root.mapEntries != nil else { throw .malformedAssertion("assertion object is not a CBOR map") }
        guard let signature = root[text: "signature"]?.bytesValue else {
            throw .malformedAssertion("assertion has no signature byte string")
        }
        guard ECDSASignatureDER.isWellFormed(signature) else {
            throw .malformedAssertion("signature is not a DER ECDSA P-256 signature")
        }
        guard let authData = root[text: "authenticatorData"]?.bytesValue else {
            throw .malformedAssertion("assertion has no authenticatorData byte string")
        }
        do {
            return ParsedAssertion(signature: signature, authenticatorData: try .parseAssertion(authData))
        } catch {
            throw .malformedAssertion("authenticatorData: \(error)")
        }
    }

    /// The counter the assertion claims (not yet verified).
    public var counter: UInt32 { authenticatorData.counter }

    /// Steps 2–5: signature over `nonce = H(authData ‖ clientDataHash)`
    /// (signed digest `H(nonce)`), rpIdHash = H(appId), counter > previous.
    /// `previousCounter` nil skips step 5 (the gateway checks it atomically).
    public func verify(
        publicKey: P256PublicKey, appId: String, clientDataHash: [UInt8], previousCounter: UInt32?
    ) throws(VerificationError) -> VerifiedAssertion {
        try verify(appId: appId, clientDataHash: clientDataHash, previousCounter: previousCounter) {
            publicKey.verify(signature: $0, digest: $1)
        }
    }

    /// The same steps with a loop-confined verifier that reuses its OpenSSL
    /// context (the gateway's hot path).
    public func verify(
        verifier: P256Verifier, appId: String, clientDataHash: [UInt8], previousCounter: UInt32?
    ) throws(VerificationError) -> VerifiedAssertion {
        try verify(appId: appId, clientDataHash: clientDataHash, previousCounter: previousCounter) {
            verifier.verify(signature: $0, digest: $1)
        }
    }

    private func verify(
        appId: String, clientDataHash: [UInt8], previousCounter: UInt32?,
        checkSignature: ([UInt8], [UInt8]) -> Bool
    ) throws(VerificationError) -> VerifiedAssertion {
        let nonce = SHA256.hash(authenticatorData.raw, clientDataHash)
        guard checkSignature(signature, SHA256.hash(nonce)) else {
            throw .badSignature("assertion signature does not verify with the attested key")
        }
        guard ConstantTime.equal(authenticatorData.rpIdHash, SHA256.hash(appId)) else {
            throw .appIdMismatch("rpIdHash is not the hash of \(appId)")
        }
        if let previousCounter, authenticatorData.counter <= previousCounter {
            throw .counterReplay("counter \(authenticatorData.counter) is not above \(previousCounter)")
        }
        return VerifiedAssertion(counter: authenticatorData.counter, extensions: authenticatorData.extensions)
    }
}
