/// An HTTP/2 upstream connection's open streams by id, looked up on every
/// event of a response. The gateway opens client streams with odd ids,
/// counting up, and only a bounded number at a time: `id / 2` modulo a
/// power of two is a slot no other open stream has, unless a stream stays
/// open while `slotCount` newer ones open, and those few go to a
/// dictionary. A slot costs an array index where hashing the id into a
/// dictionary cost ~120 instructions, four or five times a request.
struct H2StreamTable<Stream> {
    private static var slotCount: Int { 256 }
    /// 0: empty (stream ids start at 1).
    private var ids: [Int32]
    private var streams: [Stream?]
    /// Streams whose slot was taken when they opened.
    private var overflow: [Int32: Stream] = [:]

    init() {
        ids = Array(repeating: 0, count: Self.slotCount)
        streams = Array(repeating: nil, count: Self.slotCount)
    }

    @inline(__always)
    private static func slot(_ id: Int32) -> Int { Int(id >> 1) & (slotCount - 1) }

    private var count = 0
    var isEmpty: Bool { count == 0 }

    subscript(id: Int32) -> Stream? {
        let i = Self.slot(id)
        if ids[i] == id { return streams[i] }
        return overflow.isEmpty ? nil : overflow[id]
    }

    /// `id` is new (nghttp2 never reuses a stream id on a connection).
    mutating func insert(_ stream: Stream, id: Int32) {
        count += 1
        let i = Self.slot(id)
        if ids[i] == 0 {
            ids[i] = id
            streams[i] = stream
        } else {
            overflow[id] = stream
        }
    }

    mutating func remove(_ id: Int32) -> Stream? {
        let i = Self.slot(id)
        let removed: Stream?
        if ids[i] == id {
            ids[i] = 0
            removed = streams[i]
            streams[i] = nil
        } else if overflow.isEmpty {
            return nil
        } else {
            removed = overflow.removeValue(forKey: id)
        }
        if removed != nil { count -= 1 }
        return removed
    }

    /// Every stream, by increasing id, leaving the table empty.
    mutating func removeAllInOrder() -> [Stream] {
        var pairs: [(Int32, Stream)] = overflow.map { ($0.key, $0.value) }
        for i in ids.indices where ids[i] != 0 {
            if let s = streams[i] { pairs.append((ids[i], s)) }
        }
        self = H2StreamTable()
        return pairs.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// The streams, in no particular order.
    var all: [Stream] {
        var out = Array(overflow.values)
        for s in streams { if let s { out.append(s) } }
        return out
    }
}
