import Verifier

/// RFC 9457 `application/problem+json` bodies for everything the gateway
/// answers itself (protocol.md §5).
public enum ProblemDetails {
    public static let contentType = "application/problem+json"

    public static func type(for reason: ReasonToken) -> String { "urn:assertgate:problem:\(reason.rawValue)" }

    /// `{"type":…,"title":…,"status":…,"reason":…,"requestId":…}` plus `detail` when given.
    /// `status` overrides the reason's own status where the protocol says so
    /// (the admin listener's `404 unknown-key`).
    public static func body(reason: ReasonToken, requestId: String, detail: String? = nil, status: Int? = nil) -> String {
        var members: [(String, String)] = [
            ("type", JSONText.quoted(type(for: reason))),
            ("title", JSONText.quoted(reason.title)),
            ("status", String(status ?? reason.httpStatus)),
            ("reason", JSONText.quoted(reason.rawValue)),
            ("requestId", JSONText.quoted(requestId)),
        ]
        if let detail { members.append(("detail", JSONText.quoted(detail))) }
        return JSONText.object(members)
    }
}
