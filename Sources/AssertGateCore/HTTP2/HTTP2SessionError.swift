import CNGHTTP2

/// An nghttp2 call failed; `code` is its `nghttp2_error` value.
struct HTTP2SessionError: Error, CustomStringConvertible {
    let code: Int32

    init(code: Int32) { self.code = code }

    init(code: Int) { self.code = Int32(clamping: code) }

    var description: String {
        guard let text = nghttp2_strerror(code) else { return "nghttp2 error \(code)" }
        return "nghttp2 error \(code): \(String(cString: text))"
    }
}
