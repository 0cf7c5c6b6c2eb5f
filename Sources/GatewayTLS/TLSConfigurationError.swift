/// Why a TLS listener (or the TLS client of `rediss://`) could not be configured. Every case names the file or
/// value at fault and carries OpenSSL's own error text, so an operator can fix
/// the config without a debugger.
public enum TLSConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `SSL_CTX_new` failed (out of memory or a broken OpenSSL install).
    case contextCreation(reason: String)
    /// The certificate chain file is missing, unreadable or not PEM.
    case certificate(path: String, reason: String)
    /// The CA file to verify a server with is missing, unreadable or holds no PEM certificate.
    case caFile(path: String, reason: String)
    /// The private key file is missing, unreadable, encrypted or not PEM.
    case privateKey(path: String, reason: String)
    /// The key does not belong to the leaf certificate.
    case keyMismatch(certificatePath: String, privateKeyPath: String, reason: String)
    /// An ALPN protocol name is empty or longer than 255 bytes, or the list is empty.
    case invalidALPN(protocols: [String])
    /// OpenSSL rejected a setting (protocol version, ALPN list).
    case setting(name: String, reason: String)

    public var description: String {
        switch self {
        case .contextCreation(let reason):
            return "TLS: cannot create SSL_CTX: \(reason)"
        case .certificate(let path, let reason):
            return "TLS: cannot load certificate chain '\(path)': \(reason)"
        case .caFile(let path, let reason):
            return "TLS: cannot load CA certificates '\(path)': \(reason)"
        case .privateKey(let path, let reason):
            return "TLS: cannot load private key '\(path)': \(reason)"
        case .keyMismatch(let certificatePath, let privateKeyPath, let reason):
            return "TLS: private key '\(privateKeyPath)' does not match certificate '\(certificatePath)': \(reason)"
        case .invalidALPN(let protocols):
            return "TLS: invalid ALPN protocol list \(protocols) (need 1...255 bytes per name, at least one name)"
        case .setting(let name, let reason):
            return "TLS: OpenSSL rejected \(name): \(reason)"
        }
    }
}
