/// Where a stream's outgoing DATA comes from (a response body on a server
/// session; a request body on a client one). The session keeps its source
/// until nghttp2 closes the stream, and reads it from inside `mem_send`.
protocol HTTP2DataSource: AnyObject {
    /// Copies up to `buffer.count` bytes into nghttp2's frame buffer. Runs
    /// inside an nghttp2 callback: it may touch only its own state.
    func readData(into buffer: UnsafeMutableRawBufferPointer) -> HTTP2DataRead
}

/// What one read from an `HTTP2DataSource` gave.
enum HTTP2DataRead: Equatable {
    /// `count` bytes were copied; `end` when no more will follow; `drained`
    /// when the source's backlog fell below its low-water mark with this read
    /// (the session reports `.drained`, for a producer paused upstream).
    case bytes(Int, end: Bool, drained: Bool)
    /// Nothing to send yet: the stream waits for `HTTP2Session.resume`.
    case deferred
}
