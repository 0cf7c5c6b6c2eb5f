import COpenSSL

/// Errors thrown by DeviceSim. OpenSSL failures carry the drained error queue
/// so a broken build of a certificate or receipt says which call failed.
public enum DeviceSimError: Error, Equatable, CustomStringConvertible, Sendable {
    case openSSL(operation: String, detail: String)
    case invalidInput(String)
    case io(path: String, reason: String)

    public var description: String {
        switch self {
        case .openSSL(let operation, let detail): return "OpenSSL \(operation) failed: \(detail)"
        case .invalidInput(let reason): return "invalid input: \(reason)"
        case .io(let path, let reason): return "\(path): \(reason)"
        }
    }

    /// Builds an `.openSSL` error and clears OpenSSL's thread-local error queue.
    static func openSSL(_ operation: String) -> DeviceSimError {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            parts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return .openSSL(operation: operation, detail: parts.isEmpty ? "no detail" : parts.joined(separator: "; "))
    }
}
