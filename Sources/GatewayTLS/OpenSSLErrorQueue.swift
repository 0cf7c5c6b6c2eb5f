import COpenSSL

/// Reads OpenSSL's thread-local error queue. The queue is per thread and
/// sticky, so callers clear it before an operation and drain it after a
/// failure; otherwise a stale entry would be blamed on the next connection.
public enum OpenSSLErrorQueue {
    public static func clear() {
        ERR_clear_error()
    }

    /// Empties the queue and returns its entries joined, oldest first.
    public static func drain() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            // Cap the loop: the queue is bounded by OpenSSL, this only guards
            // against a pathological build.
            if messages.count >= 16 { continue }
            var text = [CChar](repeating: 0, count: 256)
            text.withUnsafeMutableBufferPointer { buffer in
                if let base = buffer.baseAddress {
                    ERR_error_string_n(code, base, buffer.count)
                }
            }
            messages.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "no OpenSSL error recorded" : messages.joined(separator: "; ")
    }
}
