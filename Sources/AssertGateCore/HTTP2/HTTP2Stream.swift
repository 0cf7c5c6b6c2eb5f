import NIOCore
import NIOHTTP1

/// One client stream: the request as decoded from HEADERS, and the response
/// body waiting for nghttp2's data provider. It is the pipeline's `ResponseSink`.
final class HTTP2Stream: ResponseSink {
    let id: Int32
    /// Weak: a pipeline whose gate work outlives the connection may still hold this stream.
    weak var connection: HTTP2ServerConnection?

    // Request, filled by on_header.
    var method: String?
    var path: String?
    var authority: String?
    var headers = HTTPHeaders()
    var cookies: [String] = []
    var headerListBytes = 0
    var headersTooLarge = false
    var headersDone = false

    var pipeline: RequestPipeline?
    /// nghttp2 closed the stream (on_stream_close seen).
    var isClosed = false
    var responseSubmitted = false

    // Response body queued for the data provider.
    /// A plain array: empty costs no allocation (most responses have one chunk), and it
    /// stays short because the upstream is paused above `highWater`.
    var outQueue: [ByteBuffer] = []
    var outBytes = 0
    var outEnded = false
    /// The data provider returned NGHTTP2_ERR_DEFERRED and waits for resume_data.
    var deferred = false
    var congested = false
    /// When queued response bytes last moved (queued into an empty queue, or
    /// taken by nghttp2): `limits.streamWriteTimeout` counts from here.
    var lastOutputProgress = NIODeadline.uptimeNanoseconds(0)

    static let highWater = 256 << 10
    static let lowWater = 64 << 10

    init(id: Int32, connection: HTTP2ServerConnection) {
        self.id = id
        self.connection = connection
    }

    var allocator: ByteBufferAllocator { connection?.allocator ?? ByteBufferAllocator() }

    func sendResponseHead(status: Int, headers: HTTPHeaders, endStream: Bool) {
        guard !isClosed, !responseSubmitted else { return }
        responseSubmitted = true
        if endStream { outEnded = true }
        connection?.submitResponse(self, status: status, headers: headers, endStream: endStream)
    }

    func sendUpstreamResponseHead(_ head: UpstreamResponseHead, requestId: String) {
        guard !isClosed, !responseSubmitted else { return }
        responseSubmitted = true
        connection?.submitUpstreamResponse(self, head: head, requestId: requestId)
    }

    func sendResponseBody(_ buffer: ByteBuffer) {
        guard !isClosed, buffer.readableBytes > 0 else { return }
        if outBytes == 0 {
            lastOutputProgress = .now()
            connection?.watchForStalledWrites()
        }
        outBytes += buffer.readableBytes
        outQueue.append(buffer)
        if outBytes > Self.highWater { congested = true }
        connection?.resumeIfDeferred(self)
    }

    func sendResponseEnd() {
        guard !isClosed, !outEnded else { return }
        outEnded = true
        connection?.resumeIfDeferred(self)
    }

    func abortResponse() {
        guard !isClosed else { return }
        connection?.resetStream(self, errorCode: 0x2)  // INTERNAL_ERROR
    }

    func requestBodyConsumed(_ bytes: Int) {
        connection?.consume(streamId: id, bytes: bytes)
    }

    var isCongested: Bool { congested }

    func pipelineFinished() {
        guard pipeline != nil else { return }
        pipeline = nil
        connection?.requestFinished()
    }

    /// Copies up to `length` queued bytes into nghttp2's frame buffer (data provider).
    /// Runs inside an nghttp2 callback: touches only this object.
    func fill(_ dst: UnsafeMutablePointer<UInt8>, length: Int) -> Int {
        var written = 0
        while written < length, var head = outQueue.first {
            let n = min(length - written, head.readableBytes)
            head.withUnsafeReadableBytes { src in
                if let base = src.baseAddress {
                    (dst + written).update(from: base.assumingMemoryBound(to: UInt8.self), count: n)
                }
            }
            head.moveReaderIndex(forwardBy: n)
            written += n
            if head.readableBytes == 0 {
                outQueue.removeFirst()
            } else {
                outQueue[0] = head
            }
        }
        outBytes -= written
        if written > 0 { lastOutputProgress = .now() }
        return written
    }
}
