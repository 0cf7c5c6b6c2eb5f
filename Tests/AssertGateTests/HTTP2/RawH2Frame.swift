import NIOCore

/// An HTTP/2 frame as bytes (RFC 9113 §4.1), for tests that build a peer's
/// input by hand and read a session's output frame by frame.
struct RawH2Frame: Equatable {
    enum Kind: UInt8 {
        case data = 0, headers = 1, rstStream = 3, settings = 4, ping = 6, goAway = 7, windowUpdate = 8
        case continuation = 9
    }
    static let endStream: UInt8 = 0x1
    static let ack: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    var type: UInt8
    var flags: UInt8
    var streamId: Int32
    var payload: [UInt8]

    init(_ kind: Kind, flags: UInt8 = 0, stream: Int32 = 0, payload: [UInt8] = []) {
        self.init(type: kind.rawValue, flags: flags, streamId: stream, payload: payload)
    }

    init(type: UInt8, flags: UInt8, streamId: Int32, payload: [UInt8]) {
        self.type = type
        self.flags = flags
        self.streamId = streamId
        self.payload = payload
    }

    var kind: Kind? { Kind(rawValue: type) }

    var bytes: [UInt8] {
        let n = payload.count
        return [UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n),
                type, flags] + Self.be32(UInt32(bitPattern: streamId) & 0x7fff_ffff) + payload
    }

    /// Every whole frame in `buffer`, in order.
    static func parse(_ buffer: ByteBuffer) -> [RawH2Frame] {
        let b = Array(buffer.readableBytesView)
        var frames: [RawH2Frame] = []
        var i = 0
        while i + 9 <= b.count {
            let n = Int(b[i]) << 16 | Int(b[i + 1]) << 8 | Int(b[i + 2])
            guard i + 9 + n <= b.count else { break }
            let sid = Int32(bitPattern: u32(b, i + 5) & 0x7fff_ffff)
            frames.append(RawH2Frame(type: b[i + 3], flags: b[i + 4], streamId: sid, payload: Array(b[i + 9..<i + 9 + n])))
            i += 9 + n
        }
        return frames
    }

    /// SETTINGS entries as (id, value).
    var settings: [(UInt16, UInt32)] {
        stride(from: 0, to: payload.count - 5, by: 6).map { i in
            (UInt16(payload[i]) << 8 | UInt16(payload[i + 1]), Self.u32(payload, i + 2))
        }
    }

    /// The payload's `index`th 32-bit word: GOAWAY's last stream and code,
    /// RST_STREAM's code, WINDOW_UPDATE's increment (reserved bit included).
    func word(_ index: Int) -> UInt32 { Self.u32(payload, index * 4) }

    static func be32(_ v: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v >> 24), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8),
         UInt8(truncatingIfNeeded: v)]
    }

    private static func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }
}
