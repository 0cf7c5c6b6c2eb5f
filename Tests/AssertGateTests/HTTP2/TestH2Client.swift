import CNGHTTP2
import NIOCore

/// A client-side nghttp2 session used to drive the server handler in tests:
/// it produces real preface/SETTINGS/HEADERS/DATA bytes and parses the answers.
final class TestH2Client {
    struct Response {
        var headers: [(String, String)] = []
        /// Names of the fields the server's encoder sent never-indexed (HPACK §6.2.3).
        var neverIndexed: [String] = []
        var body: [UInt8] = []
        var closed = false
        var errorCode: UInt32 = 0
        var status: String? { headers.first { $0.0 == ":status" }?.1 }
        func header(_ name: String) -> String? { headers.first { $0.0 == name }?.1 }
        var bodyString: String { String(decoding: body, as: UTF8.self) }
    }

    private var session: OpaquePointer?
    var responses: [Int32: Response] = [:]
    var goawayCode: UInt32?
    private var uploads: [Int32: (bytes: [UInt8], offset: Int)] = [:]

    init() {
        var cbs: OpaquePointer?
        nghttp2_session_callbacks_new(&cbs)
        defer { nghttp2_session_callbacks_del(cbs) }
        nghttp2_session_callbacks_set_on_header_callback(cbs) { _, frame, name, namelen, value, valuelen, flags, ud in
            guard let c = client(ud), let frame, let name, let value else { return 0 }
            let n = String(decoding: UnsafeBufferPointer(start: name, count: namelen), as: UTF8.self)
            let v = String(decoding: UnsafeBufferPointer(start: value, count: valuelen), as: UTF8.self)
            let sid = frame.pointee.hd.stream_id
            c.responses[sid, default: Response()].headers.append((n, v))
            if flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0 {
                c.responses[sid, default: Response()].neverIndexed.append(n)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs) { _, _, sid, data, len, ud in
            guard let c = client(ud), let data else { return 0 }
            c.responses[sid, default: Response()].body.append(contentsOf: UnsafeBufferPointer(start: data, count: len))
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs) { _, sid, code, ud in
            guard let c = client(ud) else { return 0 }
            c.responses[sid, default: Response()].closed = true
            c.responses[sid, default: Response()].errorCode = code
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs) { _, frame, ud in
            guard let c = client(ud), let frame else { return 0 }
            if frame.pointee.hd.type == UInt8(NGHTTP2_GOAWAY.rawValue) { c.goawayCode = frame.pointee.goaway.error_code }
            return 0
        }
        nghttp2_session_client_new(&session, cbs, Unmanaged.passUnretained(self).toOpaque())
        nghttp2_submit_settings(session, 0, nil, 0)
    }

    deinit { nghttp2_session_del(session) }

    /// Submits a request; returns its stream id.
    @discardableResult
    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) -> Int32 {
        var all = [(":method", method), (":scheme", "http"), (":authority", "gw.test"), (":path", path)] + headers
        if let body { all.append(("content-length", String(body.count))) }
        var storage: [[UInt8]] = []
        for (n, v) in all {
            storage.append(Array(n.utf8))
            storage.append(Array(v.utf8))
        }
        return withNV(storage) { nva in
            guard let body else {
                return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil)
            }
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: nil),
                read_callback: { _, sid, buf, len, flags, _, ud in
                    guard let c = client(ud), let buf, let flags, var up = c.uploads[sid] else { return 0 }
                    let n = min(len, up.bytes.count - up.offset)
                    up.bytes.withUnsafeBufferPointer { src in
                        if let base = src.baseAddress { buf.update(from: base + up.offset, count: n) }
                    }
                    up.offset += n
                    c.uploads[sid] = up
                    if up.offset == up.bytes.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
                    return n
                })
            let sid = nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
            uploads[sid] = (body, 0)
            return sid
        }
    }

    func reset(_ streamId: Int32) {
        nghttp2_submit_rst_stream(session, 0, streamId, NGHTTP2_CANCEL.rawValue)
    }

    private func withNV<R>(_ storage: [[UInt8]], _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        let copies = storage.map { bytes -> UnsafeMutablePointer<UInt8> in
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, bytes.count))
            p.initialize(from: bytes, count: bytes.count)
            return p
        }
        defer { for p in copies { p.deallocate() } }
        var nva: [nghttp2_nv] = []
        var i = 0
        while i < storage.count {
            nva.append(nghttp2_nv(name: copies[i], value: copies[i + 1], namelen: storage[i].count,
                                  valuelen: storage[i + 1].count, flags: 0))
            i += 2
        }
        return nva.withUnsafeBufferPointer(body)
    }

    /// Everything the client wants to send now (preface first).
    func drainOutput() -> ByteBuffer {
        var out = ByteBuffer()
        while true {
            var ptr: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &ptr)
            guard n > 0, let ptr else { break }
            out.writeBytes(UnsafeRawBufferPointer(start: ptr, count: n))
        }
        return out
    }

    func feed(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            _ = nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
    }
}

private func client(_ ud: UnsafeMutableRawPointer?) -> TestH2Client? {
    guard let ud else { return nil }
    return Unmanaged<TestH2Client>.fromOpaque(ud).takeUnretainedValue()
}
