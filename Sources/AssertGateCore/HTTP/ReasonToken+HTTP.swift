import Verifier

/// How the gateway answers each reason token: the HTTP status and the
/// problem+json title, in one place. The tokens are the Verifier's wire
/// vocabulary (docs/protocol.md §5); statuses and titles belong to HTTP, so
/// they live here and not in the Verifier.
extension ReasonToken {
    /// The HTTP status the gateway answers with when it rejects for this reason.
    public var httpStatus: Int {
        switch self {
        case .malformedRequest, .malformedHeader, .malformedAssertion, .malformedAttestation,
            .unsupportedFormat, .configInvalid:
            return 400
        case .missingAssertion, .missingChallenge, .unknownKey, .unauthorized, .missingDeviceToken:
            return 401
        case .badSignature, .appIdMismatch, .revokedKey, .unknownChallenge, .counterReplay,
            .riskTooHigh, .certChainInvalid, .nonceMismatch, .keyIdMismatch, .counterNotZero,
            .aaguidMismatch, .environmentNotAllowed, .credentialIdMismatch,
            .credentialKeyMismatch, .receiptInvalid, .launchCategoryNotAllowed, .appVersionTooOld,
            .keyPolicyNotAllowed, .tooManyKeys, .deviceBitsNotAllowed, .invalidDeviceToken, .deviceTokenReused:
            return 403
        case .noRoute, .unknownUser: return 404
        case .methodNotAllowed: return 405
        case .requestTimeout: return 408
        case .keyExists: return 409
        case .bodyTooLarge: return 413
        case .rateLimited: return 429
        case .headersTooLarge: return 431
        case .upstreamUnavailable: return 502
        case .storeUnavailable, .gatewayBusy, .devicecheckUnavailable: return 503
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
        case .missingDeviceToken: return "Device token missing"
        case .deviceBitsNotAllowed: return "Device bits not allowed"
        case .invalidDeviceToken: return "Device token invalid"
        case .deviceTokenReused: return "Device token already used"
        case .devicecheckUnavailable: return "DeviceCheck unavailable"
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
