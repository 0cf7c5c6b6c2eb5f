/// Why an HTTP/2 request did not produce a response.
public enum HTTP2ClientError: Error, Equatable, CustomStringConvertible {
    /// The server sent GOAWAY and this stream was above its last-stream-id (or
    /// was still queued): the server did not process it, so it is safe to retry.
    case goaway(lastStreamId: Int32, errorCode: UInt32)
    /// The server reset the stream with REFUSED_STREAM: not processed.
    case refusedStream
    /// The connection closed before the request was sent: not processed.
    case closedBeforeSend
    /// The connection closed while the stream was open: it may have been processed.
    case connectionLost
    /// The server reset the stream with this HTTP/2 error code.
    case streamReset(errorCode: UInt32)
    /// nghttp2 reported an error (a negative `nghttp2_error`).
    case session(code: Int32, message: String)
    /// The server's SETTINGS did not arrive in time.
    case handshakeTimeout
    /// All client stream ids are used; open a new connection.
    case streamIdsExhausted
    /// The response's headers or body went past the configured limits.
    case responseTooLarge(String)

    /// True when the server certainly did not act on the request.
    public var isRetryable: Bool {
        switch self {
        case .goaway, .refusedStream, .closedBeforeSend, .streamIdsExhausted: true
        case .connectionLost, .streamReset, .session, .handshakeTimeout, .responseTooLarge: false
        }
    }

    public var description: String {
        switch self {
        case .goaway(let last, let code):
            "server sent GOAWAY (last-stream-id \(last), error \(code)); request not processed"
        case .refusedStream: "server refused the stream; request not processed"
        case .closedBeforeSend: "connection closed before the request was sent"
        case .connectionLost: "connection lost while the request was in flight"
        case .streamReset(let code): "stream reset by server (error \(code))"
        case .session(let code, let message): "nghttp2 error \(code): \(message)"
        case .handshakeTimeout: "no HTTP/2 SETTINGS from the server in time"
        case .streamIdsExhausted: "stream ids exhausted on this connection"
        case .responseTooLarge(let what): "response too large: \(what)"
        }
    }
}
