import NIOCore
import NIOHTTP1

/// The downstream side of one request (an HTTP/2 stream or an HTTP/1.1
/// exchange), as the pipeline sees it. Loop-confined.
protocol ResponseSink: AnyObject {
    var allocator: ByteBufferAllocator { get }
    /// `headers` are final (hop-by-hop removed, X-Request-Id set); the sink adds framing.
    func sendResponseHead(status: Int, headers: HTTPHeaders, endStream: Bool)
    /// An upstream's head as received: the sink drops hop-by-hop headers and the upstream's
    /// X-Request-Id and adds `requestId` (HTTP/2 does it while encoding, without a copy).
    /// The upstream's head, hop-by-hop fields marked; `X-Request-Id` is set to `requestId`.
    func sendUpstreamResponseHead(_ head: UpstreamResponseHead, requestId: String)
    /// An upstream's interim (1xx) head, hop-by-hop and trust fields marked,
    /// before the final one; the sink may drop it (an HTTP/1.0 client).
    func sendInterimHead(_ head: UpstreamResponseHead)
    func sendResponseBody(_ buffer: ByteBuffer)
    /// Trailer fields to go before the end (HTTP/2 only: an HTTP/1.1 client
    /// gets none, as documented).
    func sendResponseTrailers(_ fields: HTTPHeaders)
    func sendResponseEnd()
    /// The response cannot be completed: reset the stream / close the
    /// connection. `http2ErrorCode`: an HTTP/2 upstream's own reset code, passed
    /// on to an HTTP/2 client (nil: INTERNAL_ERROR).
    func abortResponse(http2ErrorCode: UInt32?)
    /// `bytes` of request body have been taken by the upstream (or discarded): open the window.
    func requestBodyConsumed(_ bytes: Int)
    /// Too much response body is buffered downstream: the pipeline should pause the upstream.
    var isCongested: Bool { get }
    /// The pipeline is done with this request (response sent or aborted).
    func pipelineFinished()
}

/// The body the front end announced for a request.
struct RequestBodyInfo {
    var framing: RequestBodyFraming
    /// True when the request has no body at all (END_STREAM on HEADERS / no length).
    var isEmpty: Bool { framing == .none || framing == .empty }
}
