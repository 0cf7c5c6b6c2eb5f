/// Verifies App Attest assertions (app-attest.md §3). Stateless; safe to call
/// from any thread, also with the same `P256PublicKey`.
public enum AssertionVerifier {
    /// Parse and verify in one call.
    public static func verifyAssertion(
        _ bytes: [UInt8], publicKey: P256PublicKey, appId: String, clientDataHash: [UInt8],
        previousCounter: UInt32?
    ) throws(VerificationError) -> VerifiedAssertion {
        try ParsedAssertion.parse(bytes).verify(
            publicKey: publicKey, appId: appId, clientDataHash: clientDataHash, previousCounter: previousCounter)
    }
}
