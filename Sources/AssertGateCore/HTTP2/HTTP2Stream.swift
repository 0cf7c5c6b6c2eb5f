import NIOCore
import NIOHTTP1

/// One client stream as the gateway sees it: the pipeline's `ResponseSink`,
/// and the response body waiting for nghttp2's data provider (its
/// `HTTP2DataSource`). The request head arrives decoded (`HTTP2HeaderBlock`).
final class HTTP2Stream: ResponseSink, HTTP2DataSource {
    /// Set again only by `reuse`, once nothing else holds the stream.
    private(set) var id: Int32
    /// Strong (a weak reference cost a side-table load on each of a request's
    /// half-dozen calls): the cycle through the connection's stream table is
    /// broken when the stream leaves it (its close; all streams at
    /// channelInactive and handlerRemoved). A pipeline whose gate work
    /// outlives the connection keeps the handler object (not its session or
    /// channel) until it finishes; its calls then find no session and do nothing.
    let connection: HTTP2ServerConnection

    var pipeline: RequestPipeline?
    /// nghttp2 closed the stream (on_stream_close seen).
    var isClosed = false
    var responseSubmitted = false

    // Response body queued for the data provider.
    /// The first chunk queued: most responses have one, and it needs no array
    /// (each stream's first append would allocate one). Nil only when `outQueue` is empty.
    var outFirst: ByteBuffer?
    /// The chunks after `outFirst`. Short: the upstream is paused above `highWater`.
    var outQueue: [ByteBuffer] = []
    var outBytes = 0
    var outEnded = false
    var congested = false
    /// `readData` answered `.deferred` and nghttp2 waits for a resume: the
    /// connection (and its session's slot) is asked only then, not for every
    /// chunk and end queued before nghttp2 first read the stream.
    var awaitingResume = false
    /// Times queued response bytes moved (queued into an empty queue, or taken
    /// by nghttp2): a counter, so the send path takes no clock; the
    /// connection's stall watch turns an unchanged count into quiet time.
    var outputProgress = 0
    /// For the stall watch: the count it saw last, and since when it has not changed.
    var progressAtLastCheck = 0
    var quietSince: NIODeadline?
    /// Response bytes nghttp2 has taken, and the stall watch's rate window:
    /// since when this stream has had bytes queued, and how many it had
    /// taken then (a window opened a byte at a time is progress, but not
    /// enough).
    var bytesTaken = 0
    var rateWindowStart: NIODeadline?
    var bytesAtRateWindowStart = 0

    /// The stall watch's rate check, once a tick: true when, over the
    /// `window` just ended with bytes queued throughout, nghttp2 took fewer
    /// than `minBytes` of them. A stream with nothing queued starts afresh.
    func takesTooSlowly(now: NIODeadline, window: TimeAmount, minBytes: Int) -> Bool {
        guard outBytes > 0 else {
            rateWindowStart = nil
            return false
        }
        guard let start = rateWindowStart, start + window <= now else {
            if rateWindowStart == nil {
                rateWindowStart = now
                bytesAtRateWindowStart = bytesTaken
            }
            return false
        }
        if bytesTaken - bytesAtRateWindowStart < minBytes { return true }
        rateWindowStart = now
        bytesAtRateWindowStart = bytesTaken
        return false
    }

    static let highWater = 256 << 10
    static let lowWater = 64 << 10

    init(id: Int32, connection: HTTP2ServerConnection) {
        self.id = id
        self.connection = connection
    }

    /// The stream as new, for stream `id`: the connection keeps a few closed
    /// streams that nothing else holds (a pipeline would still be one holder)
    /// instead of allocating and freeing one per request.
    func reuse(id: Int32) {
        dropQueuedOutput()
        self.id = id
        pipeline = nil
        isClosed = false
        responseSubmitted = false
        outFirst = nil
        outQueue.removeAll(keepingCapacity: true)
        outBytes = 0
        outEnded = false
        congested = false
        awaitingResume = false
        outputProgress = 0
        progressAtLastCheck = 0
        quietSince = nil
        bytesTaken = 0
        rateWindowStart = nil
        bytesAtRateWindowStart = 0
    }

    var allocator: ByteBufferAllocator { connection.allocator }

    func sendResponseHead(status: Int, headers: HTTPHeaders, endStream: Bool) {
        guard !isClosed, !responseSubmitted else { return }
        responseSubmitted = true
        if endStream { outEnded = true }
        connection.submitResponse(self, status: status, headers: headers, endStream: endStream)
    }

    func sendUpstreamResponseHead(_ head: UpstreamResponseHead, requestId: String) {
        guard !isClosed, !responseSubmitted else { return }
        responseSubmitted = true
        if head.endsStream { outEnded = true }
        connection.submitUpstreamResponse(self, head: head, requestId: requestId)
    }

    func sendInterimHead(_ head: UpstreamResponseHead) {
        guard !isClosed, !responseSubmitted else { return }
        connection.submitInterimHead(self, head: head)
    }

    func sendResponseBody(_ buffer: ByteBuffer) {
        guard !isClosed, buffer.readableBytes > 0 else { return }
        if outBytes == 0 {
            outputProgress &+= 1
            connection.watchForStalledWrites()
        }
        outBytes += buffer.readableBytes
        connection.responseQueue.add(buffer.readableBytes)
        if outFirst == nil {
            outFirst = buffer
        } else {
            outQueue.append(buffer)
        }
        if outBytes > Self.highWater { congested = true }
        resumeIfAwaited()
    }

    func sendResponseTrailers(_ fields: HTTPHeaders) {
        guard !isClosed, !outEnded, responseSubmitted else { return }
        connection.setTrailers(self, fields)
    }

    func sendResponseEnd() {
        guard !isClosed, !outEnded else { return }
        outEnded = true
        resumeIfAwaited()
    }

    private func resumeIfAwaited() {
        guard awaitingResume else { return }
        awaitingResume = false
        connection.resumeIfDeferred(self)
    }

    func abortResponse(http2ErrorCode: UInt32?) {
        guard !isClosed else { return }
        connection.resetStream(self, errorCode: http2ErrorCode ?? 0x2)  // INTERNAL_ERROR
    }

    func requestBodyConsumed(_ bytes: Int) {
        connection.consume(streamId: id, bytes: bytes)
    }

    var isCongested: Bool { congested }

    func pipelineFinished() {
        guard pipeline != nil else { return }
        pipeline = nil
        connection.requestFinished()
    }

    /// nghttp2's data provider: the queued bytes, the end once queued and
    /// taken, or a wait (`deferred`) until `resumeIfDeferred`.
    func readData(into buffer: UnsafeMutableRawBufferPointer) -> HTTP2DataRead {
        let n = fill(buffer)
        var end = false
        if outFirst == nil {
            if outEnded {
                end = true
            } else if n == 0 {
                awaitingResume = true
                return .deferred
            }
        }
        var drained = false
        if congested, outBytes < Self.lowWater {
            congested = false
            drained = true
        }
        return .bytes(n, end: end, drained: drained)
    }

    /// Drops the queued response bytes (a stalled stream being reset, a
    /// stream closed or its connection gone: nothing will take them).
    func dropQueuedOutput() {
        guard outFirst != nil else { return }
        connection.responseQueue.add(-outBytes)
        outFirst = nil
        outQueue.removeAll()
        outBytes = 0
    }

    /// Copies queued bytes into `dst` (nghttp2's frame buffer). Runs inside an
    /// nghttp2 callback: touches only this object.
    private func fill(_ dst: UnsafeMutableRawBufferPointer) -> Int {
        guard dst.baseAddress != nil else { return 0 }
        var written = 0
        while written < dst.count, var head = outFirst {
            written += head.moveBytes(into: dst, at: written)
            if head.readableBytes == 0 {
                outFirst = outQueue.isEmpty ? nil : outQueue.removeFirst()
            } else {
                outFirst = head
            }
        }
        outBytes -= written
        if written > 0 {
            outputProgress &+= 1
            bytesTaken &+= written
            connection.responseQueue.add(-written)
        }
        return written
    }
}
