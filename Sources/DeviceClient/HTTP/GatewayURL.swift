/// `http://host[:port]` as accepted by `--gateway`. Only cleartext is
/// supported: HTTP/2 is spoken with prior knowledge.
public struct GatewayURL: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public enum ParseError: Error, CustomStringConvertible, Equatable {
        case unsupportedScheme(String)
        case badPort(String)
        case missingHost

        public var description: String {
            switch self {
            case .unsupportedScheme(let s): "unsupported URL scheme in \(s) (only http:// is supported)"
            case .badPort(let s): "bad port in \(s)"
            case .missingHost: "URL has no host"
            }
        }
    }

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public init(parsing text: String) throws(ParseError) {
        guard text.hasPrefix("http://") else { throw .unsupportedScheme(text) }
        var rest = Substring(text.dropFirst("http://".count))
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var host = rest
        var port = 80
        if rest.hasPrefix("[") {
            // IPv6 literal: [::1]:8080
            guard let close = rest.firstIndex(of: "]") else { throw .missingHost }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { throw .badPort(text) }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else {
                throw .badPort(text)
            }
            port = p
        }
        guard !host.isEmpty else { throw .missingHost }
        self.host = String(host)
        self.port = port
    }

    /// The `:authority` / `Host` value.
    public var authority: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == 80 ? h : "\(h):\(port)"
    }

    public var description: String { "http://\(authority)" }
}
