import Verifier

/// Why an upstream exchange failed; mapped to 502/504 by the pipeline.
enum UpstreamError: Error, Equatable {
    /// Connect refused/reset/unreachable: nothing was sent, retryable for idempotent methods.
    case connectFailed
    /// Connect did not finish within `connectTimeout`: nothing was sent, retryable.
    case connectTimeout
    /// No response head within `responseTimeout` after the request was sent.
    case responseTimeout
    /// Waited for a free connection (maxConnectionsPerEndpoint) longer than `responseTimeout`.
    case queueTimeout
    /// The connection closed before the response completed.
    case connectionLost
    /// The response could not be read (see `UpstreamResponseError`): never
    /// replayed, since the upstream may have acted on the request.
    case invalidResponse
    /// The route names an upstream with no endpoints.
    case noEndpoints
    /// An HTTP/2 upstream refused the stream (REFUSED_STREAM, or above a
    /// GOAWAY's last stream id): it never processed it, so it may be sent again.
    case refusedStream
    /// An HTTP/2 upstream reset the stream after taking it, with this code.
    case streamReset(UInt32)

    var isConnectFailure: Bool { self == .connectFailed || self == .connectTimeout }

    /// The code an HTTP/2 client's stream is reset with when an upstream's
    /// stream was: the upstream's own `CANCEL`, `INTERNAL_ERROR` or
    /// `ENHANCE_YOUR_CALM`; every other code becomes `INTERNAL_ERROR`. Those
    /// describe the upstream hop (`PROTOCOL_ERROR`, `FLOW_CONTROL_ERROR`, …
    /// are often nghttp2's verdict on the upstream), and would tell the client
    /// it broke the protocol (RFC 9113 §7); `NO_ERROR` would pass a truncated
    /// body as whole.
    var resetCode: UInt32? {
        guard case .streamReset(let code) = self else { return nil }
        switch code {
        case 0x8, 0x2, 0xb: return code
        default: return 0x2
        }
    }

    var reason: ReasonToken {
        switch self {
        case .responseTimeout, .queueTimeout: return .upstreamTimeout
        case .connectFailed, .connectTimeout, .connectionLost, .invalidResponse, .noEndpoints, .refusedStream, .streamReset:
            return .upstreamUnavailable
        }
    }
}
