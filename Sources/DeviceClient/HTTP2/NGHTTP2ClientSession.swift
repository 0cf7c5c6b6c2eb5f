import CNGHTTP2

/// Owns one `nghttp2_session` (client side) and frees it in `deinit`.
///
/// `user_data` is an unretained pointer to the handler: the handler owns this
/// object, so it outlives the session and every callback. Callbacks run only
/// inside the handler's own `mem_recv` / `mem_send` calls and never call back
/// into nghttp2.
final class NGHTTP2ClientSession {
    let raw: OpaquePointer

    init(handler: HTTP2ClientHandler) throws(HTTP2ClientError) {
        var callbacksOut: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacksOut) == 0, let callbacks = callbacksOut else {
            throw .session(code: Int32(NGHTTP2_ERR_NOMEM.rawValue), message: "nghttp2_session_callbacks_new failed")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameRecv)

        var optionOut: OpaquePointer?
        guard nghttp2_option_new(&optionOut) == 0, let option = optionOut else {
            throw .session(code: Int32(NGHTTP2_ERR_NOMEM.rawValue), message: "nghttp2_option_new failed")
        }
        defer { nghttp2_option_del(option) }
        // Until the server's SETTINGS arrive, assume the RFC's recommended floor.
        nghttp2_option_set_peer_max_concurrent_streams(option, 100)

        var sessionOut: OpaquePointer?
        let userData = Unmanaged.passUnretained(handler).toOpaque()
        let rv = nghttp2_session_client_new2(&sessionOut, callbacks, userData, option)
        guard rv == 0, let session = sessionOut else { throw .session(code: rv, message: Self.errorString(rv)) }
        self.raw = session
    }

    deinit {
        nghttp2_session_del(raw)
    }

    static func errorString(_ code: Int32) -> String {
        guard let c = nghttp2_strerror(code) else { return "unknown" }
        return String(cString: c)
    }

    var remoteMaxConcurrentStreams: Int {
        Int(nghttp2_session_get_remote_settings(raw, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    var wantsIO: Bool {
        nghttp2_session_want_read(raw) != 0 || nghttp2_session_want_write(raw) != 0
    }
}

// MARK: - C callbacks (no captures; they find the delegate through user_data)

@inline(__always)
private func delegate(_ userData: UnsafeMutableRawPointer?) -> HTTP2ClientHandler? {
    guard let userData else { return nil }
    return Unmanaged<HTTP2ClientHandler>.fromOpaque(userData).takeUnretainedValue()
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame, let d = delegate(userData) else { return 0 }
    if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) {
        d.sessionDidBeginHeaders(streamId: frame.pointee.hd.stream_id)
    }
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, let d = delegate(userData) else { return 0 }
    guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    d.sessionDidReceiveHeader(
        streamId: frame.pointee.hd.stream_id,
        name: UnsafeRawBufferPointer(start: name, count: nameLength),
        value: UnsafeRawBufferPointer(start: value, count: valueLength))
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamId, data, length, userData in
    guard let d = delegate(userData) else { return 0 }
    d.sessionDidReceiveData(streamId: streamId, data: UnsafeRawBufferPointer(start: data, count: length))
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamId, errorCode, userData in
    delegate(userData)?.sessionDidCloseStream(streamId: streamId, errorCode: errorCode)
    return 0
}

private let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame, let d = delegate(userData) else { return 0 }
    let type = frame.pointee.hd.type
    if type == UInt8(NGHTTP2_SETTINGS.rawValue), frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
        d.sessionDidReceiveSettings()
    } else if type == UInt8(NGHTTP2_GOAWAY.rawValue) {
        d.sessionDidReceiveGoaway(
            lastStreamId: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code)
    }
    return 0
}

/// Data provider callback for request bodies.
let nghttp2ReadBody: nghttp2_data_source_read_callback = { _, streamId, buffer, length, dataFlags, _, userData in
    guard let d = delegate(userData), let buffer, let dataFlags else {
        return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }
    var eof = false
    let n = d.sessionReadBody(streamId: streamId, into: UnsafeMutableRawBufferPointer(start: buffer, count: length), eof: &eof)
    if n < 0 { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
    if eof { dataFlags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
    return n
}
