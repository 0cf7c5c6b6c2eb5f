/// Why a verification failed. Each case maps to exactly one reason token of
/// protocol.md §5; `detail` says precisely what was wrong, for logs and the
/// offline CLI (it never contains secret or assertion bytes).
public enum VerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformedAssertion(String)
    case malformedAttestation(String)
    case unsupportedFormat(String)
    case badSignature(String)
    case appIdMismatch(String)
    case counterReplay(String)
    case certChainInvalid(String)
    case nonceMismatch(String)
    case keyIdMismatch(String)
    case counterNotZero(String)
    case aaguidMismatch(String)
    case environmentNotAllowed(String)
    case credentialIdMismatch(String)
    case credentialKeyMismatch(String)
    case receiptInvalid(String)

    public var reason: ReasonToken {
        switch self {
        case .malformedAssertion: return .malformedAssertion
        case .malformedAttestation: return .malformedAttestation
        case .unsupportedFormat: return .unsupportedFormat
        case .badSignature: return .badSignature
        case .appIdMismatch: return .appIdMismatch
        case .counterReplay: return .counterReplay
        case .certChainInvalid: return .certChainInvalid
        case .nonceMismatch: return .nonceMismatch
        case .keyIdMismatch: return .keyIdMismatch
        case .counterNotZero: return .counterNotZero
        case .aaguidMismatch: return .aaguidMismatch
        case .environmentNotAllowed: return .environmentNotAllowed
        case .credentialIdMismatch: return .credentialIdMismatch
        case .credentialKeyMismatch: return .credentialKeyMismatch
        case .receiptInvalid: return .receiptInvalid
        }
    }

    public var detail: String {
        switch self {
        case .malformedAssertion(let d), .malformedAttestation(let d), .unsupportedFormat(let d),
            .badSignature(let d), .appIdMismatch(let d), .counterReplay(let d),
            .certChainInvalid(let d), .nonceMismatch(let d), .keyIdMismatch(let d),
            .counterNotZero(let d), .aaguidMismatch(let d), .environmentNotAllowed(let d),
            .credentialIdMismatch(let d), .credentialKeyMismatch(let d), .receiptInvalid(let d):
            return d
        }
    }

    public var description: String { "\(reason.rawValue): \(detail)" }
}
