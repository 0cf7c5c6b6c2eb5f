import NIOHTTP1
import Verifier

/// What both front ends do with a request head before a pipeline exists, in
/// one place (as nghttpx's HTTP/1.1 and HTTP/2 inspections fill one
/// `Downstream`): the client's trust-prefixed and underscore headers, the
/// request id, an absolute-form target, and the body's framing.
enum RequestIntake {
    /// How the body is delimited on the wire the head came from.
    enum Wire {
        /// `Transfer-Encoding` / `Content-Length`, RFC 9112 §6.
        case http1
        /// `END_STREAM` on the HEADERS frame; else DATA frames, their total
        /// announced by `content-length` when the client sent one.
        case http2(endStream: Bool)
    }

    /// `refusal` is set when the head itself is refused (`underscoresInHeaders:
    /// reject`): the pipeline answers it before anything else. A tuple, so a
    /// front end takes the parts apart by move: a struct's request was copied
    /// into the pipeline and the rest released, every request.
    typealias Accepted = (request: ProxyRequest, body: RequestBodyInfo, refusal: Rejection?)

    /// `mayHaveHost`: false when the HTTP/2 session saw no `host` field, so
    /// no list is searched for one.
    static func accept(
        method: String, target: String, authority: String?, headers: HTTPHeaders, wire: Wire, scheme: String,
        clientAddress: String?, worker: Worker, mayHaveHost: Bool = true
    ) -> Accepted {
        let snapshot = worker.snapshot
        var headers = headers
        let clean = HeaderRewriter.sanitizeClientHeaders(&headers, snapshot: snapshot)
        var target = target
        var authority = authority
        var refusal: Rejection? = clean ? nil : Rejection(.malformedRequest, "a header name spelled with an underscore")
        switch wire {
        case .http1:
            if let absolute = AbsoluteTarget(target) {
                // RFC 9112 §3.2.2: the target's authority replaces any Host header.
                target = absolute.originForm
                authority = absolute.authority
                headers.remove(name: "host")
            } else {
                // The authority is carried as HTTP/2 carries it, so the Host
                // sent upstream is rendered from it and nothing (a `Connection:
                // host`) can drop it on the way.
                authority = headers.first(name: "host")
            }
        case .http2:
            // :authority, else a Host field (RFC 9113 §8.3.1). A Host naming
            // another site than :authority is malformed (§8.3.1, a SHOULD):
            // the upstream could act on the one the gateway did not log.
            if mayHaveHost, let host = headers.first(name: "host") {
                if let authority {
                    if !ASCII.sameIgnoringCase(host, authority) {
                        refusal = refusal ?? Rejection(.malformedRequest, "Host differs from :authority")
                    }
                } else {
                    authority = host
                }
            }
        }
        // RFC 9112 §3.2 (a MUST for HTTP/1.1, RFC 9113 §8.3.1 for HTTP/2):
        // an authority that is no host and port (a path, userinfo, a port of
        // letters) and a target with bytes a URI may not hold are answered 400
        // here, not passed on for an upstream to read its own way.
        if let a = authority, !URISyntax.isAuthority(a) {
            refusal = refusal ?? Rejection(.malformedRequest, "Host is not a host and port")
        }
        if !URISyntax.isTarget(target) {
            refusal = refusal ?? Rejection(.malformedRequest, "the request target holds a byte a URI may not (a fragment, a space, non-ASCII)")
        }
        var fieldsChecked = false
        if case .http2 = wire { fieldsChecked = true }
        let request = ProxyRequest(
            method: method, target: target, authority: authority, scheme: scheme, headers: headers,
            requestId: worker.requestId(clientValue: headers.first(name: "x-request-id")),
            clientAddress: clientAddress, snapshot: snapshot, fieldsChecked: fieldsChecked)
        return (
            request: request, body: RequestBodyInfo(framing: framing(method: method, headers: headers, wire: wire)),
            refusal: refusal)
    }

    static func framing(method: String, headers: HTTPHeaders, wire: Wire) -> RequestBodyFraming {
        switch wire {
        case .http1:
            // `chunked` alone (RFC 9112 §6.1): a coding before it would reach
            // the upstream unlabelled, and a last coding that is not chunked
            // leaves the body undelimited. Either is framed as none, and the
            // HTTP/1.1 front end refuses the head.
            let codings = headers[canonicalForm: "transfer-encoding"]
            if !codings.isEmpty {
                return codings.count == 1 && ASCII.equalsCI(String(codings[0]), "chunked") ? .chunked : .none
            }
            if let cl = headers.first(name: "content-length") {
                // The parser framed the body by this value; read it as the parser
                // did. NIO's hands it over with trailing spaces, and
                // `Int("44 ")` is nil: such a body went upstream unframed
                // (a request smuggled behind it). A value it let through that
                // still reads as no number is framed as none here, and the
                // HTTP/1.1 front end refuses the head.
                guard let n = contentLength(cl) else { return .none }
                return n == 0 ? .empty : .contentLength(n)
            }
            return .none
        case .http2(let endStream):
            if endStream { return (method == "POST" || method == "PUT" || method == "PATCH") ? .empty : .none }
            if let cl = headers.first(name: "content-length"), let n = contentLength(cl) { return .contentLength(n) }
            return .chunked
        }
    }

    /// A `Content-Length` value without its surrounding spaces and tabs:
    /// digits only (RFC 9110 §8.6), else nil.
    static func contentLength(_ value: String) -> Int? {
        ASCII.contentLength(ASCII.trimmed(value.utf8))
    }
}

extension ResponseSink {
    /// Answers a request refused at its head, before any pipeline exists (an
    /// HTTP/1.1 head over the limit or unparsable, an HTTP/2 header list over
    /// the limit), with its problem, and reports it like a pipeline would, so
    /// it is counted and logged with its reason. `contentType` is what the
    /// head said, where it was kept: a gRPC request gets the trailers-only
    /// answer a refusal through the pipeline gets.
    func refuseHead(
        _ rejection: Rejection, requestId: String, method: String, target: String, contentType: String? = nil,
        observer: (any RequestObserver)?
    ) {
        let answer = ProblemWriter.answer(rejection, requestId: requestId, requestContentType: contentType)
        observer?.requestFinished(
            .refusedHead(
                requestId: requestId, method: method, target: target, status: answer.status, reason: rejection.reason))
        // A trailers-only answer has no body: its one HEADERS frame ends the stream.
        sendResponseHead(status: answer.status, headers: HTTPHeaders(answer.headers), endStream: answer.body.isEmpty)
        guard !answer.body.isEmpty else { return }
        sendResponseBody(allocator.buffer(string: answer.body))
        sendResponseEnd()
    }
}
