/// How the mock answers a request of one endpoint instead of (or as) Apple
/// would. Scripted answers are used once each, in order; a standing answer
/// applies to every request after the script runs out.
public enum AppleMockAnswer: Sendable, Equatable {
    /// What Apple would answer for the request and the mock's state.
    case normal
    /// This status, with this text as the body.
    case status(Int, String)
    /// 200 with plain text, as Apple answers a query for bits never set.
    case neverSet(String)
    /// The request is read and never answered (the connection stays open).
    case stall
    /// The connection is closed without an answer.
    case close
    /// attestationData: a fresh receipt with this risk metric.
    case receipt(riskMetric: Int, notBeforeInSeconds: Int64?)
    /// attestationData: 200 with a receipt signed by a CA nobody trusts.
    case untrustedReceipt

    /// Apple's two spellings of "never set" (devicecheck.md).
    public static let failedToFindBitState = AppleMockAnswer.neverSet("Failed to find bit state")
    public static let bitStateNotFound = AppleMockAnswer.neverSet("Bit State Not Found")

    /// The text form of the CLI and the control endpoint: `normal`, `stall`,
    /// `close`, `never-set` (or `never-set:TEXT`), a status `NNN` (or
    /// `NNN:TEXT`), `receipt:RISK`, `untrusted-receipt`.
    public init?(spec: String) {
        let parts = spec.split(separator: ":", maxSplits: 1).map(String.init)
        guard let head = parts.first else { return nil }
        let text = parts.count > 1 ? parts[1] : nil
        switch head {
        case "normal": self = .normal
        case "stall": self = .stall
        case "close": self = .close
        case "never-set": self = .neverSet(text ?? "Failed to find bit state")
        case "untrusted-receipt": self = .untrustedReceipt
        case "receipt":
            guard let risk = text.flatMap({ Int($0) }) else { return nil }
            self = .receipt(riskMetric: risk, notBeforeInSeconds: nil)
        default:
            guard head.count == 3, let status = Int(head), (100...599).contains(status) else { return nil }
            self = .status(status, text ?? Self.appleText(status))
        }
    }

    /// The text Apple is reported to send with a status.
    static func appleText(_ status: Int) -> String {
        switch status {
        case 400: return "Missing or incorrectly formatted device token payload"
        case 401: return "Unable to verify authorization token"
        case 403: return "Forbidden"
        case 429: return "Too many requests"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return ""
        }
    }
}
