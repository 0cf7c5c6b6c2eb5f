import COpenSSL

enum OpenSSLErrors {
    /// Drains this thread's OpenSSL error queue and returns the first reason
    /// string, so a failed call never leaks errors into a later one.
    static func drain() -> String {
        var first: String?
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if first == nil, let reason = ERR_reason_error_string(code) {
                first = String(cString: reason)
            }
        }
        return first ?? "unknown OpenSSL error"
    }

    static func clear() { ERR_clear_error() }
}
