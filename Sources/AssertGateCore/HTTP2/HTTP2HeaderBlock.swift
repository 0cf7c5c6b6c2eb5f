import NIOHTTP1

/// A stream's head as nghttp2 decoded it (a request's, on a server session):
/// the pseudo-header fields picked out, the regular fields in order. HTTP/2
/// lets a client split `cookie` into one field per crumb (RFC 9113 §8.2.3);
/// they arrive joined into one last `cookie` field, as HTTP/1.1 carries it.
/// (A client session's responses are `UpstreamResponseHead`s instead.)
struct HTTP2HeaderBlock {
    var method: String?
    var path: String?
    var authority: String?
    /// A regular `host` field came too: the intake looks for it only then.
    var hasHost = false
    /// The regular fields in order, a plain array while nghttp2 decodes them:
    /// `HTTPHeaders.add` would check each name for ASCII and `connection`,
    /// which nghttp2 has already refused.
    var fieldList: [(String, String)] = []
    /// The regular fields (the list shared, not copied).
    var fields: HTTPHeaders { HTTPHeaders(fieldList) }
}
