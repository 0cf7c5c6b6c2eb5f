import NIOHTTP1

/// Header rewriting of protocol.md §6 (requests) and §5 (responses).
enum HeaderRewriter {
    /// Removes every header whose name starts with the trust prefix (any case).
    /// Done first, before anything (gate included) reads the headers.
    static func stripTrustPrefix(_ headers: inout HTTPHeaders, snapshot: GatewaySnapshot) {
        var spoofed = false
        for (name, _) in headers where ASCII.hasPrefixCI(name, lowerPrefix: snapshot.trustPrefixLower) {
            spoofed = true
            break
        }
        guard spoofed else { return }
        var kept = HTTPHeaders()
        kept.reserveCapacity(headers.count)
        for (name, value) in headers where !ASCII.hasPrefixCI(name, lowerPrefix: snapshot.trustPrefixLower) {
            kept.add(name: name, value: value)
        }
        headers = kept
    }

    /// Hop-by-hop names that are never forwarded (RFC 9110 §7.6.1 plus the usual extras).
    static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: return ASCII.equalsCI(name, "te")
        case 7: return ASCII.equalsCI(name, "trailer") || ASCII.equalsCI(name, "upgrade")
        case 10: return ASCII.equalsCI(name, "connection") || ASCII.equalsCI(name, "keep-alive")
        case 17: return ASCII.equalsCI(name, "transfer-encoding") || ASCII.hasPrefixCI(name, lowerPrefix: proxyPrefix)
        default: return ASCII.hasPrefixCI(name, lowerPrefix: proxyPrefix)
        }
    }
    private static let proxyPrefix: [UInt8] = Array("proxy-".utf8)

    /// Lower-cased extra header names listed in `Connection` headers. The common
    /// `keep-alive`/`close`/`upgrade` tokens are left out: they name nothing else to drop,
    /// so the usual `Connection: keep-alive` costs no per-header work.
    static func connectionTokens(_ headers: HTTPHeaders) -> [String] {
        var tokens: [String] = []
        for (name, value) in headers where ASCII.equalsCI(name, "connection") {
            // The usual single token, without splitting into Characters.
            if ASCII.equalsCI(value, "keep-alive") || ASCII.equalsCI(value, "close") { continue }
            for t in value.split(separator: ",") {
                let trimmed = String(t.trimmingASCIIWhitespace())
                if trimmed.isEmpty || ASCII.equalsCI(trimmed, "keep-alive") || ASCII.equalsCI(trimmed, "close")
                    || ASCII.equalsCI(trimmed, "upgrade")
                {
                    continue
                }
                tokens.append(trimmed.lowercased())
            }
        }
        return tokens
    }

    static func isListed(_ name: String, _ listed: [String]) -> Bool {
        if listed.isEmpty { return false }
        for token in listed where ASCII.equalsCI(name, lower: Array(token.utf8)) { return true }
        return false
    }

    /// Builds the upstream request headers from the client's (already trust-stripped) headers.
    static func upstreamRequestHeaders(
        client: HTTPHeaders, authority: String?, route: RouteConfig, snapshot: GatewaySnapshot,
        requestId: String, clientAddress: String?, scheme: String, extra: [(String, String)],
        bodyFraming: RequestBodyFraming, fallbackHost: String? = nil
    ) -> HTTPHeaders {
        let listed = connectionTokens(client)
        var out = HTTPHeaders()
        out.reserveCapacity(client.count + 6 + extra.count)
        if let authority { out.add(name: "Host", value: authority) }
        var xff: String?
        var forwarded: String?
        for (name, value) in client {
            if isHopByHop(name) { continue }
            if !listed.isEmpty, isListed(name, listed) { continue }
            if ASCII.equalsCI(name, "x-request-id") || ASCII.equalsCI(name, "x-forwarded-proto")
                || ASCII.equalsCI(name, "content-length") || ASCII.equalsCI(name, "expect")
            {
                continue
            }
            if authority != nil, ASCII.equalsCI(name, "host") { continue }
            if ASCII.equalsCI(name, "x-forwarded-for") {
                xff = xff.map { $0 + ", " + value } ?? value
                continue
            }
            if ASCII.equalsCI(name, "forwarded") {
                forwarded = forwarded.map { $0 + ", " + value } ?? value
                continue
            }
            if !route.forwardAssertionHeaders,
                snapshot.assertionHeadersLower.contains(where: { ASCII.equalsCI(name, lower: $0) })
            {
                continue
            }
            out.add(name: name, value: value)
        }
        if authority == nil, let fallbackHost, !client.contains(name: "host") {
            // HTTP/1.1 needs a Host; an HTTP/1.0 client may not have sent one.
            out.add(name: "Host", value: fallbackHost)
        }
        switch bodyFraming {
        case .none:
            break
        case .empty:
            out.add(name: "Content-Length", value: "0")
        case .contentLength(let n):
            out.add(name: "Content-Length", value: String(n))
        case .chunked:
            out.add(name: "Transfer-Encoding", value: "chunked")
        }
        out.add(name: "X-Request-Id", value: requestId)
        let client = clientAddress ?? "unknown"
        out.add(name: "X-Forwarded-For", value: xff.map { $0 + ", " + client } ?? client)
        let node = client.contains(":") ? "\"[\(client)]\"" : client
        let element = "for=\(node);proto=\(scheme)"
        out.add(name: "Forwarded", value: forwarded.map { $0 + ", " + element } ?? element)
        out.add(name: "X-Forwarded-Proto", value: scheme)
        for (name, value) in extra { out.add(name: name, value: value) }
        return out
    }

    /// Upstream response headers → client: hop-by-hop removed, X-Request-Id replaced.
    static func downstreamResponseHeaders(_ upstream: HTTPHeaders, requestId: String) -> HTTPHeaders {
        let listed = connectionTokens(upstream)
        var out = HTTPHeaders()
        out.reserveCapacity(upstream.count + 1)
        for (name, value) in upstream {
            if isHopByHop(name) || ASCII.equalsCI(name, "x-request-id") { continue }
            if !listed.isEmpty, isListed(name, listed) { continue }
            out.add(name: name, value: value)
        }
        out.add(name: "x-request-id", value: requestId)
        return out
    }
}

/// How the request body is framed towards the HTTP/1.1 upstream.
enum RequestBodyFraming: Equatable {
    /// No body and a method that needs no length (GET, HEAD, …).
    case none
    /// No body but a method that expects one (POST/PUT/PATCH): `Content-Length: 0`.
    case empty
    case contentLength(Int)
    case chunked
}

extension Substring {
    func trimmingASCIIWhitespace() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}
