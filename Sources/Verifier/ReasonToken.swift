/// The stable reason tokens of docs/protocol.md §5, shared by the Verifier, the
/// gateway's problem+json answers, trust headers, metrics and logs. A new case
/// needs its row in that table (`| `token` | status |`): DocCoverageTests checks.
public enum ReasonToken: String, Sendable, CaseIterable, Hashable {
    // 400
    case malformedRequest = "malformed-request"
    case malformedHeader = "malformed-header"
    case malformedAssertion = "malformed-assertion"
    case malformedAttestation = "malformed-attestation"
    case unsupportedFormat = "unsupported-format"
    case configInvalid = "config-invalid"
    // 401
    case missingAssertion = "missing-assertion"
    case missingChallenge = "missing-challenge"
    case unknownKey = "unknown-key"
    case unauthorized = "unauthorized"
    case missingDeviceToken = "missing-device-token"
    // 403
    case badSignature = "bad-signature"
    case appIdMismatch = "app-id-mismatch"
    case revokedKey = "revoked-key"
    case unknownChallenge = "unknown-challenge"
    case counterReplay = "counter-replay"
    case riskTooHigh = "risk-too-high"
    case certChainInvalid = "cert-chain-invalid"
    case nonceMismatch = "nonce-mismatch"
    case keyIdMismatch = "key-id-mismatch"
    case counterNotZero = "counter-not-zero"
    case aaguidMismatch = "aaguid-mismatch"
    case environmentNotAllowed = "environment-not-allowed"
    case credentialIdMismatch = "credential-id-mismatch"
    case credentialKeyMismatch = "credential-key-mismatch"
    case receiptInvalid = "receipt-invalid"
    // 403, risk rules (risk.md §2, §5)
    case launchCategoryNotAllowed = "launch-category-not-allowed"
    case appVersionTooOld = "app-version-too-old"
    case keyPolicyNotAllowed = "key-policy-not-allowed"
    case tooManyKeys = "too-many-keys"
    // 403, DeviceCheck (risk.md §3)
    case deviceBitsNotAllowed = "device-bits-not-allowed"
    case invalidDeviceToken = "invalid-device-token"
    case deviceTokenReused = "device-token-reused"
    // 404, 405, 408, 409, 413, 429, 431
    case noRoute = "no-route"
    case unknownUser = "unknown-user"
    case methodNotAllowed = "method-not-allowed"
    case requestTimeout = "request-timeout"
    case keyExists = "key-exists"
    case bodyTooLarge = "body-too-large"
    case rateLimited = "rate-limited"
    case headersTooLarge = "headers-too-large"
    // 502, 503, 504
    case upstreamUnavailable = "upstream-unavailable"
    case storeUnavailable = "store-unavailable"
    case gatewayBusy = "gateway-busy"
    case devicecheckUnavailable = "devicecheck-unavailable"
    case upstreamTimeout = "upstream-timeout"
}
