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
    case upstreamTimeout = "upstream-timeout"

    /// The HTTP status the gateway answers with when it rejects for this reason.
    public var httpStatus: Int {
        switch self {
        case .malformedRequest, .malformedHeader, .malformedAssertion, .malformedAttestation,
            .unsupportedFormat, .configInvalid:
            return 400
        case .missingAssertion, .missingChallenge, .unknownKey, .unauthorized:
            return 401
        case .badSignature, .appIdMismatch, .revokedKey, .unknownChallenge, .counterReplay,
            .riskTooHigh, .certChainInvalid, .nonceMismatch, .keyIdMismatch, .counterNotZero,
            .aaguidMismatch, .environmentNotAllowed, .credentialIdMismatch,
            .credentialKeyMismatch, .receiptInvalid, .launchCategoryNotAllowed, .appVersionTooOld,
            .keyPolicyNotAllowed, .tooManyKeys:
            return 403
        case .noRoute, .unknownUser: return 404
        case .methodNotAllowed: return 405
        case .requestTimeout: return 408
        case .keyExists: return 409
        case .bodyTooLarge: return 413
        case .rateLimited: return 429
        case .headersTooLarge: return 431
        case .upstreamUnavailable: return 502
        case .storeUnavailable, .gatewayBusy: return 503
        case .upstreamTimeout: return 504
        }
    }

    /// The short human title used in problem+json bodies.
    public var title: String {
        switch self {
        case .malformedRequest: return "Malformed request"
        case .malformedHeader: return "Malformed assertion header"
        case .malformedAssertion: return "Malformed assertion"
        case .malformedAttestation: return "Malformed attestation"
        case .unsupportedFormat: return "Unsupported attestation format"
        case .configInvalid: return "Configuration invalid"
        case .missingAssertion: return "Assertion missing"
        case .missingChallenge: return "Challenge missing"
        case .unknownKey: return "Unknown key"
        case .unauthorized: return "Unauthorized"
        case .badSignature: return "Assertion signature invalid"
        case .appIdMismatch: return "App ID mismatch"
        case .revokedKey: return "Key revoked"
        case .unknownChallenge: return "Unknown or spent challenge"
        case .counterReplay: return "Assertion counter did not increase"
        case .riskTooHigh: return "Risk metric too high"
        case .certChainInvalid: return "Certificate chain invalid"
        case .nonceMismatch: return "Attestation nonce mismatch"
        case .keyIdMismatch: return "Key ID mismatch"
        case .counterNotZero: return "Attestation counter not zero"
        case .aaguidMismatch: return "AAGUID mismatch"
        case .environmentNotAllowed: return "Environment not allowed"
        case .credentialIdMismatch: return "Credential ID mismatch"
        case .credentialKeyMismatch: return "Credential key mismatch"
        case .receiptInvalid: return "Receipt invalid"
        case .launchCategoryNotAllowed: return "Launch category not allowed"
        case .appVersionTooOld: return "App version too old"
        case .keyPolicyNotAllowed: return "Key policy not allowed"
        case .tooManyKeys: return "Too many keys for this user"
        case .unknownUser: return "Unknown user"
        case .noRoute: return "No route"
        case .methodNotAllowed: return "Method not allowed"
        case .requestTimeout: return "Request body too slow"
        case .keyExists: return "Key already attested"
        case .bodyTooLarge: return "Body too large"
        case .rateLimited: return "Rate limited"
        case .headersTooLarge: return "Headers too large"
        case .upstreamUnavailable: return "Upstream unavailable"
        case .storeUnavailable: return "Store unavailable"
        case .gatewayBusy: return "Gateway busy"
        case .upstreamTimeout: return "Upstream timeout"
        }
    }
}
