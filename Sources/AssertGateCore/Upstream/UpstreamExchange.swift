import NIOCore
import NIOHTTP1

/// A request head as `HeaderRewriter` wrote it for the upstream's protocol.
enum UpstreamHead {
    case http1(UpstreamRequestHead)
    /// Boxed: inline, the HTTP/2 head's size made every copy and destroy of
    /// an `UpstreamHead?` (the pipeline keeps one for a replay) a call
    /// through Optional's generic value witnesses, ~250 instructions each.
    indirect case http2(UpstreamH2Head)
}

/// One request's exchange with an upstream, as the pipeline drives it: an
/// HTTP/1.1 keep-alive connection (`UpstreamConnection`) or a stream on a
/// multiplexed HTTP/2 connection (`UpstreamH2Stream`). Loop-confined.
protocol UpstreamExchange: AnyObject {
    /// `head` is the kind the exchange speaks (written by `HeaderRewriter`);
    /// consumed, so its payload moves out without a copy of its buffers.
    func sendHead(_ head: consuming UpstreamHead, end: Bool)
    /// `promise` completes when the upstream side has taken the bytes (the
    /// client's window opens then).
    func sendBody(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?)
    /// Request trailers, before `sendEnd` (HTTP/2 only; HTTP/1.1 drops them).
    func sendTrailers(_ fields: HTTPHeaders)
    func sendEnd()
    func pauseReads()
    func resumeReads()
    /// Leased but never used (the client went away while waiting).
    func releaseUnused()
    /// The client left after its whole request went upstream: finish the
    /// exchange and discard the answer so a keep-alive connection survives.
    /// False when the exchange cannot (an HTTP/2 stream is cancelled
    /// instead: nothing is lost by resetting it).
    func drainForLeavingClient() -> Bool
    /// Never reuse what carries this exchange; an HTTP/2 stream is reset (CANCEL).
    func abandon()
    var isClosed: Bool { get }
    /// Failed before any byte of the response and safe to send again as it
    /// is (a stale keep-alive connection; a stream the server refused).
    func mayReplay(after error: UpstreamError) -> Bool
}
