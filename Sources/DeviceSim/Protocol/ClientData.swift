/// The clientData an AssertGate app builds (protocol.md §3 and §4); the
/// device signs over `hash(clientData)` as its clientDataHash.
public enum ClientData {
    /// What the assertion's last line binds: the body's hash, or nothing on
    /// routes with `bindBody: false`.
    public enum BodyBinding: Sendable {
        case body([UInt8])
        case unsigned
    }

    /// `"assertgate-attest-v1" LF challenge LF userId` (nil and "" both mean no user).
    public static func attestation(challenge: String, userId: String? = nil) -> [UInt8] {
        Array("assertgate-attest-v1\n\(challenge)\n\(userId ?? "")".utf8)
    }

    /// `"assertgate-assert-v1" LF method LF path LF challenge LF bodyHash`,
    /// `path` exactly as sent on the wire, `challenge` empty on routes without one.
    public static func assertion(method: String, path: String, challenge: String?, body: BodyBinding) -> [UInt8] {
        let bodyHash: String
        switch body {
        case .body(let bytes): bodyHash = Hex.encode(Digest.sha256(bytes))
        case .unsigned: bodyHash = "UNSIGNED-PAYLOAD"
        }
        return Array("assertgate-assert-v1\n\(method)\n\(path)\n\(challenge ?? "")\n\(bodyHash)".utf8)
    }

    /// clientDataHash = H(clientData).
    public static func hash(_ clientData: [UInt8]) -> [UInt8] { Digest.sha256(clientData) }
}
