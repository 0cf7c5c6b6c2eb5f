/// The front end's open streams by id, the one looked up last (a request's
/// events come one stream at a time, so most lookups skip hashing), and a few
/// closed streams kept for the next heads (`HTTP2Stream.reuse`): a stream
/// object per request would be an allocation and a deinit. One value, so each
/// operation is one exclusivity check on the connection's property, not one
/// per part touched.
struct HTTP2StreamTable {
    private var byId: [Int32: HTTP2Stream] = [:]
    private var last: HTTP2Stream?
    private var spare: [HTTP2Stream] = []
    static let maxSpare = 4

    var openStreams: Dictionary<Int32, HTTP2Stream>.Values { byId.values }

    mutating func lookup(_ id: Int32) -> HTTP2Stream? {
        if let s = last, s.id == id { return s }
        let s = byId[id]
        if s != nil { last = s }
        return s
    }

    /// The stream a complete head opens: a spare one reused, else a new one.
    mutating func open(_ id: Int32, connection: HTTP2ServerConnection) -> HTTP2Stream {
        let stream: HTTP2Stream
        if let s = spare.popLast() {
            s.reuse(id: id)
            stream = s
        } else {
            stream = HTTP2Stream(id: id, connection: connection)
        }
        byId[id] = stream
        last = stream
        return stream
    }

    /// nghttp2 closed stream `id`: it leaves the table, marked closed.
    /// Returned only while its pipeline runs (the caller aborts it, then
    /// `recycle`s it); a finished one is recycled here, in the same access.
    mutating func close(_ id: Int32) -> HTTP2Stream? {
        if last?.id == id { last = nil }
        guard var stream = byId.removeValue(forKey: id) else { return nil }
        stream.isClosed = true
        // Nothing takes its queued bytes now: they leave the worker's count.
        stream.dropQueuedOutput()
        if stream.pipeline != nil { return stream }
        recycle(&stream)
        return nil
    }

    /// Keeps a closed stream for reuse if nothing else holds it: then no
    /// pipeline, task or session slot can reach it any more.
    mutating func recycle(_ stream: inout HTTP2Stream) {
        guard stream.pipeline == nil, spare.count < Self.maxSpare, isKnownUniquelyReferenced(&stream) else { return }
        spare.append(stream)
    }

    /// Empties the table (spare streams included); returns the open streams.
    mutating func removeAll() -> [HTTP2Stream] {
        let open = Array(byId.values)
        byId.removeAll()
        last = nil
        spare.removeAll()
        return open
    }
}
