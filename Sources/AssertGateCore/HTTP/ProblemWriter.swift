import NIOCore
import Verifier

/// An answer the gateway produces itself, rendered and ready to send.
public struct ProblemAnswer: Sendable {
    public var status: Int
    /// Lower-case names (HTTP/2 needs them; HTTP/1.1 does not care).
    public var headers: [(String, String)]
    public var body: String
}

/// The one writer of RFC 9457 `application/problem+json` answers (protocol.md
/// §5), used by the request pipeline, the front ends' head refusals, the
/// attestation routes and the admin listener alike, so every refusal has the
/// same body, the same headers and the status of `ReasonToken+HTTP.swift`.
public enum ProblemWriter {
    public static let contentType = "application/problem+json"

    public static func type(for reason: ReasonToken) -> String { "urn:assertgate:problem:\(reason.rawValue)" }

    public static func answer(_ rejection: Rejection, requestId: String) -> ProblemAnswer {
        let body = self.body(rejection, requestId: requestId)
        var headers: [(String, String)] = [
            ("content-type", contentType),
            ("content-length", String(body.utf8.count)),
            ("x-request-id", requestId),
        ]
        if let retry = rejection.retryAfter { headers.append(("retry-after", String(retry))) }
        if let allow = rejection.allow { headers.append(("allow", allow)) }
        return ProblemAnswer(status: rejection.status, headers: headers, body: body)
    }

    /// `{"type":…,"title":…,"status":…,"reason":…,"requestId":…}`, plus
    /// `detail` when the rejection has one: which check failed, what an app
    /// developer needs to fix an integration (never secret material).
    public static func body(_ rejection: Rejection, requestId: String) -> String {
        let reason = rejection.reason
        var members: [(String, String)] = [
            ("type", JSONText.quoted(type(for: reason))),
            ("title", JSONText.quoted(reason.title)),
            ("status", String(rejection.status)),
            ("reason", JSONText.quoted(reason.rawValue)),
            ("requestId", JSONText.quoted(requestId)),
        ]
        if !rejection.detail.isEmpty { members.append(("detail", JSONText.quoted(rejection.detail))) }
        return JSONText.object(members)
    }
}
