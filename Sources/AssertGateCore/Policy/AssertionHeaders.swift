import Verifier

/// The three assertion request headers of protocol.md §4, decoded and checked
/// for form only (step 1). Nothing here touches the store or the signature.
public struct AssertionHeaders: Sendable, Equatable {
    public static let maxAssertionBytes = 4 << 10
    public var keyId: [UInt8]
    public var assertion: [UInt8]
    /// The challenge string as sent (part of the client data); nil on routes without one.
    public var challenge: String?

    /// `lookup` returns the first value of a header by lower-cased name.
    public static func parse(
        names: AssertionHeaderNames, challengeRequired: Bool, lookup: (String) -> String?
    ) throws(Rejection) -> AssertionHeaders {
        func value(_ name: String) -> String? {
            guard let v = lookup(name.lowercased()), !v.isEmpty else { return nil }
            return v
        }
        guard let keyIdText = value(names.keyId), let assertionText = value(names.assertion) else {
            throw Rejection(.missingAssertion, "key id or assertion header absent")
        }
        let challengeText = challengeRequired ? value(names.challenge) : nil
        if challengeRequired, challengeText == nil {
            throw Rejection(.missingChallenge, "route requires a challenge")
        }
        let keyId = try KeyIdCodec.decode(keyIdText, reason: .malformedHeader)
        let assertion: [UInt8]
        do {
            assertion = try Base64.decode(
                assertionText, maxLength: Base64.encodedLength(ofAtMost: maxAssertionBytes))
        } catch .tooLong {
            throw Rejection(.malformedHeader, "assertion over 4 KiB")
        } catch {
            throw Rejection(.malformedHeader, "assertion is not base64")
        }
        guard assertion.count <= maxAssertionBytes else {
            throw Rejection(.malformedHeader, "assertion over 4 KiB")
        }
        if let c = challengeText, !ChallengeCodec.isWellFormed(c) {
            throw Rejection(.malformedHeader, "challenge must be 43 characters of unpadded base64url")
        }
        return AssertionHeaders(keyId: keyId, assertion: assertion, challenge: challengeText)
    }
}
