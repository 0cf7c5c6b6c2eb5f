#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Syntax checks for the values of docs/config.md; each returns the reason on failure.
enum ConfigSyntax {
    /// `host:port` with IPv6 in brackets; host is an IP literal or a DNS name.
    static func hostPort(_ text: String) -> Result<HostPort, ValueParseError> {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                return .failure(ValueParseError("missing ']' in IPv6 address '\(text)'"))
            }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else {
                return .failure(ValueParseError("expected host:port (IPv6 as [::1]:8443), got '\(text)'"))
            }
            portPart = rest.dropFirst()
            guard isIPv6(String(hostPart)) else {
                return .failure(ValueParseError("'\(hostPart)' is not an IPv6 address"))
            }
        } else {
            guard let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon else {
                return .failure(ValueParseError("expected host:port (IPv6 as [::1]:8443), got '\(text)'"))
            }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            guard isIPv4(String(hostPart)) || isHostname(String(hostPart)) else {
                return .failure(ValueParseError("'\(hostPart)' is not an IPv4 address or host name"))
            }
        }
        guard !portPart.isEmpty, portPart.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), portPart.count <= 5,
            let port = Int(portPart), port <= 65535
        else {
            return .failure(ValueParseError("invalid port '\(portPart)' in '\(text)' (0-65535)"))
        }
        return .success(HostPort(host: String(hostPart), port: port))
    }

    static func isIPv4(_ text: String) -> Bool {
        var addr = in_addr()
        return inet_pton(AF_INET, text, &addr) == 1
    }

    static func isIPv6(_ text: String) -> Bool {
        var addr = in6_addr()
        return inet_pton(AF_INET6, text, &addr) == 1
    }

    static func isHostname(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 253 else { return false }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        // An all-numeric dotted name is a malformed IPv4 address, not a host name.
        if labels.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }) { return false }
        return labels.allSatisfy { label in
            guard !label.isEmpty, label.utf8.count <= 63, label.first != "-", label.last != "-" else { return false }
            return label.utf8.allSatisfy { isAlnum($0) || $0 == UInt8(ascii: "-") }
        }
    }

    static func isAlnum(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122)
    }

    /// RFC 9110 `token` (header field names, methods).
    static func isToken(_ text: String) -> Bool {
        guard !text.isEmpty else { return false }
        return text.utf8.allSatisfy { b in
            isAlnum(b) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    static func isTeamId(_ text: String) -> Bool {
        text.utf8.count == 10 && text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) }
    }

    /// `TEAMID.bundle.id`: a 10-character team id, then a bundle id of letters,
    /// digits, `-` and `.` without empty components.
    static func appId(_ text: String) -> ValueParseError? {
        guard let dot = text.firstIndex(of: ".") else {
            return ValueParseError("'\(text)' is not TEAMID.bundleID")
        }
        let team = String(text[..<dot])
        let bundle = text[text.index(after: dot)...]
        guard isTeamId(team) else {
            return ValueParseError("team id '\(team)' in '\(text)' must be 10 characters of A-Z and 0-9")
        }
        let parts = bundle.split(separator: ".", omittingEmptySubsequences: false)
        guard !bundle.isEmpty, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { isAlnum($0) || $0 == UInt8(ascii: "-") } })
        else {
            return ValueParseError("bundle id '\(bundle)' in '\(text)' must be dot-separated letters, digits and '-'")
        }
        return nil
    }

    /// Path prefixes and exact paths of routes.
    static func path(_ text: String) -> ValueParseError? {
        guard text.hasPrefix("/") else { return ValueParseError("'\(text)' must start with '/'") }
        for b in text.utf8 where b <= 0x20 || b >= 0x7F || b == UInt8(ascii: "#") {
            _ = b
            return ValueParseError("'\(text)' contains a space, control, '#' or non-ASCII character")
        }
        return nil
    }

    /// `http://host[:port][/]` or `https://host[:port][/]` (HTTP/1.1 over TLS).
    static func upstreamEndpoint(_ text: String) -> Result<UpstreamEndpoint, ValueParseError> {
        // Longest scheme first: "h2c://" before "h2://", "https://" before "http://".
        let schemes: [(String, UpstreamEndpoint.Scheme)] = [
            ("https://", .https), ("http://", .http), ("h2c://", .h2c), ("h2://", .h2),
        ]
        guard let (prefix, scheme) = schemes.first(where: { text.hasPrefix($0.0) }) else {
            return .failure(ValueParseError("'\(text)' must be an http://, https://, h2c:// or h2:// URL (host and port)"))
        }
        var rest = Substring(text.dropFirst(prefix.count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("/") || rest.contains("?") || rest.contains("@") || rest.contains("#") {
            return .failure(ValueParseError("'\(text)' must be \(prefix)host:port without user, path or query"))
        }
        let defaultPort = scheme.tls ? 443 : 80
        let withPort: String
        if rest.hasPrefix("[") {
            withPort = rest.hasSuffix("]") ? "\(rest):\(defaultPort)" : String(rest)
        } else {
            withPort = rest.contains(":") ? String(rest) : "\(rest):\(defaultPort)"
        }
        switch hostPort(withPort) {
        case .success(let hp):
            guard hp.port > 0 else { return .failure(ValueParseError("'\(text)': port must not be 0")) }
            return .success(UpstreamEndpoint(host: hp.host, port: hp.port, scheme: scheme))
        case .failure(let e):
            return .failure(ValueParseError("'\(text)': \(e.message)"))
        }
    }

    static func httpsURL(_ text: String) -> ValueParseError? {
        guard text.hasPrefix("https://") else { return ValueParseError("'\(text)' must be an https:// URL") }
        var rest = Substring(text.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@"), !rest.contains("?") else {
            return ValueParseError("'\(text)' must be https://host[:port] without path or query")
        }
        let hp = rest.contains(":") && !rest.hasSuffix("]") ? String(rest) : "\(rest):443"
        if case .failure(let e) = hostPort(hp) { return ValueParseError("'\(text)': \(e.message)") }
        return nil
    }
}
