/// The clientData strings of protocol.md §3 and §4, built independently of the
/// gateway so a bug on one side is caught by the other.
public enum AssertGateClientData {
    /// The last line of `assertClientData`.
    public enum BodyHash: Sendable, Equatable {
        case body([UInt8])
        case unsignedPayload

        public var text: String {
            switch self {
            case .body(let bytes): SHA256Digest.hex(bytes)
            case .unsignedPayload: "UNSIGNED-PAYLOAD"
            }
        }
    }

    /// `"assertgate-attest-v1" LF challenge LF userId` (nil / "" = no user).
    public static func attest(challenge: String, userId: String?) -> [UInt8] {
        Array("assertgate-attest-v1\n\(challenge)\n\(userId ?? "")".utf8)
    }

    /// `"assertgate-assert-v1" LF method LF path LF challenge LF bodyHash`;
    /// `path` exactly as sent on the wire, `challenge` empty when not used.
    public static func assert(method: String, path: String, challenge: String?, bodyHash: BodyHash) -> [UInt8] {
        Array("assertgate-assert-v1\n\(method)\n\(path)\n\(challenge ?? "")\n\(bodyHash.text)".utf8)
    }
}
