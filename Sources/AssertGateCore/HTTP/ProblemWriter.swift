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

    // MARK: gRPC

    /// The refusal in the shape the client reads: trailers-only for a gRPC
    /// request (its `content-type`), a problem+json body otherwise.
    public static func answer(_ rejection: Rejection, requestId: String, requestContentType: String?) -> ProblemAnswer {
        isGRPC(contentType: requestContentType)
            ? grpcAnswer(rejection, requestId: requestId) : answer(rejection, requestId: requestId)
    }

    /// A request gRPC clients make: `content-type: application/grpc`, or
    /// `application/grpc+proto` and the like.
    public static func isGRPC(contentType: String?) -> Bool {
        guard let type = contentType?.utf8 else { return false }
        let base: StaticString = "application/grpc"
        let n = base.utf8CodeUnitCount
        guard type.count >= n, ASCII.equalsLower(type.prefix(n), base) else { return false }
        guard let next = type.dropFirst(n).first else { return true }
        return next == UInt8(ascii: "+") || next == UInt8(ascii: ";")
    }

    /// The same refusal for a gRPC client, which reads trailers, not bodies: a
    /// trailers-only answer (HTTP 200, one HEADERS frame that ends the
    /// stream) with `grpc-status` from the HTTP status, `grpc-message` the
    /// reason's title, and `assertgate-reason` the token.
    public static func grpcAnswer(_ rejection: Rejection, requestId: String) -> ProblemAnswer {
        var headers: [(String, String)] = [
            ("content-type", "application/grpc"),
            ("grpc-status", String(grpcStatus(forHTTP: rejection.status))),
            ("grpc-message", percentEncodedMessage(rejection.reason.title)),
            ("assertgate-reason", rejection.reason.rawValue),
            ("x-request-id", requestId),
        ]
        if let retry = rejection.retryAfter { headers.append(("retry-after", String(retry))) }
        return ProblemAnswer(status: 200, headers: headers, body: "")
    }

    /// gRPC's codes for the gateway's statuses (the mapping gRPC's own
    /// HTTP-to-status table suggests, made specific to the gateway's answers).
    public static func grpcStatus(forHTTP status: Int) -> Int {
        switch status {
        case 400: return 3  // INVALID_ARGUMENT
        case 401: return 16  // UNAUTHENTICATED
        case 403: return 7  // PERMISSION_DENIED
        case 404, 405: return 12  // UNIMPLEMENTED
        case 408, 504: return 4  // DEADLINE_EXCEEDED
        case 409: return 6  // ALREADY_EXISTS
        case 413, 429, 431: return 8  // RESOURCE_EXHAUSTED
        case 502, 503: return 14  // UNAVAILABLE
        default: return 2  // UNKNOWN
        }
    }

    /// gRPC's percent-encoding of `grpc-message`: printable ASCII except `%` as is.
    static func percentEncodedMessage(_ text: String) -> String {
        var out = ""
        for b in text.utf8 {
            if b >= 0x20, b <= 0x7E, b != UInt8(ascii: "%") {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + String(b, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
