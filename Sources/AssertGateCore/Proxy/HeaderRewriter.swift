import NIOCore
import NIOHTTP1

/// Header rewriting of protocol.md §6 (requests) and §5 (responses).
enum HeaderRewriter {
    /// The client's headers as the gateway accepts them, in one pass: every
    /// name with the trust prefix removed, and names containing `_` handled by
    /// `limits.underscoresInHeaders` (CGI-style upstreams read `X_AssertGate_User`
    /// as `X-AssertGate-User`). Done first, before anything (gate included)
    /// reads the headers. False: the request must be refused (`reject`).
    static func sanitizeClientHeaders(_ headers: inout HTTPHeaders, snapshot: GatewaySnapshot) -> Bool {
        let policy = snapshot.config.limits.underscoresInHeaders
        var dirty = false
        for (name, _) in headers {
            if ASCII.hasPrefixCI(name, lowerPrefix: snapshot.trustPrefixLower) || name.utf8.contains(underscore) {
                dirty = true
                break
            }
        }
        guard dirty else { return true }
        var kept = HTTPHeaders()
        kept.reserveCapacity(headers.count)
        for (name, value) in headers {
            if ASCII.hasPrefixCI(name, lowerPrefix: snapshot.trustPrefixLower) { continue }
            if name.utf8.contains(underscore) {
                switch policy {
                case .reject: return false
                case .drop: continue
                case .allow: if readsAsReserved(name, snapshot: snapshot) { continue }
                }
            }
            kept.add(name: name, value: value)
        }
        headers = kept
        return true
    }

    private static let underscore = UInt8(ascii: "_")

    /// Names the gateway sets or owns, as a CGI-style server would read them.
    private static let reservedNames: [[UInt8]] = [
        "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "forwarded", "x-real-ip",
        "x-request-id",
    ].map { Array($0.utf8) }

    /// With `_` read as `-`: the trust prefix or a forwarding header.
    static func readsAsReserved(_ name: String, snapshot: GatewaySnapshot) -> Bool {
        let folded = name.utf8.map { $0 == underscore ? UInt8(ascii: "-") : ASCII.lower($0) }
        if folded.starts(with: snapshot.trustPrefixLower) { return true }
        return reservedNames.contains(folded)
    }

    /// `lower` (a lower-cased name) is a forwarding header the gateway sets.
    static func isReservedName(_ lower: [UInt8]) -> Bool { reservedNames.contains(lower) }

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
        requestId: String, clientAddress: String?, scheme: String, extra: [(name: String, value: String)],
        bodyFraming: RequestBodyFraming, fallbackHost: String? = nil
    ) -> HTTPHeaders {
        var out = HTTPHeaders()
        out.reserveCapacity(client.count + 6 + extra.count)
        writeUpstreamRequestHeaders(
            into: &out, client: client, authority: authority, route: route, snapshot: snapshot,
            requestId: requestId, clientAddress: clientAddress, scheme: scheme, extra: extra,
            bodyFraming: bodyFraming, fallbackHost: fallbackHost)
        return out
    }

    /// The whole HTTP/1.1 request head as bytes (request line, the headers of
    /// `upstreamRequestHeaders`, empty line); nil when a name, value or the target
    /// is not valid to send (NIO's header validator would have refused it too).
    static func upstreamRequestHead(
        method: String, target: String, client: HTTPHeaders, authority: String?, route: RouteConfig,
        snapshot: GatewaySnapshot, requestId: String, clientAddress: String?, scheme: String,
        extra: [(name: String, value: String)], bodyFraming: RequestBodyFraming, fallbackHost: String? = nil,
        allocator: ByteBufferAllocator
    ) -> UpstreamRequestHead? {
        var writer = UpstreamHeadWriter(method: method, target: target, allocator: allocator)
        writeUpstreamRequestHeaders(
            into: &writer, client: client, authority: authority, route: route, snapshot: snapshot,
            requestId: requestId, clientAddress: clientAddress, scheme: scheme, extra: extra,
            bodyFraming: bodyFraming, fallbackHost: fallbackHost)
        guard writer.isValid else { return nil }
        return UpstreamRequestHead(bytes: writer.finish(), isHead: method == "HEAD", chunked: bodyFraming == .chunked)
    }

    /// The same head for an HTTP/2 upstream (`upstreamScheme`: `http` for
    /// h2c, `https` for h2); nil when a byte could not be sent.
    static func upstreamH2Head(
        method: String, target: String, client: HTTPHeaders, authority: String?, route: RouteConfig,
        snapshot: GatewaySnapshot, requestId: String, clientAddress: String?, scheme: String,
        extra: [(name: String, value: String)], bodyFraming: RequestBodyFraming, fallbackHost: String? = nil,
        upstreamScheme: String, trailers: Bool
    ) -> UpstreamH2Head? {
        var head = UpstreamH2Head(method: method, target: target, scheme: upstreamScheme, trailers: trailers)
        writeUpstreamRequestHeaders(
            into: &head, client: client, authority: authority, route: route, snapshot: snapshot,
            requestId: requestId, clientAddress: clientAddress, scheme: scheme, extra: extra,
            bodyFraming: bodyFraming, fallbackHost: fallbackHost)
        head.finish()
        return head.isValid ? head : nil
    }

    static func writeUpstreamRequestHeaders<Sink: UpstreamHeaderSink>(
        into out: inout Sink, client: HTTPHeaders, authority: String?, route: RouteConfig,
        snapshot: GatewaySnapshot, requestId: String, clientAddress: String?, scheme: String,
        extra: [(name: String, value: String)], bodyFraming: RequestBodyFraming, fallbackHost: String?
    ) {
        let listed = connectionTokens(client)
        if let authority { out.add(name: "Host", value: authority) }
        var xff: String?
        var forwarded: String?
        var sawHost = false
        for (name, value) in client {
            let n = name.utf8.count
            let isHost = n == 4 && ASCII.equalsCI(name, "host")
            if isHost { sawHost = true }
            if isHopByHop(name) { continue }
            if !listed.isEmpty, isListed(name, listed) { continue }
            // Length first: most names are rejected by one integer compare.
            if (n == 12 && ASCII.equalsCI(name, "x-request-id")) || (n == 17 && ASCII.equalsCI(name, "x-forwarded-proto"))
                || (n == 14 && ASCII.equalsCI(name, "content-length")) || (n == 6 && ASCII.equalsCI(name, "expect"))
            {
                continue
            }
            if isHost, authority != nil { continue }
            if n == 15, ASCII.equalsCI(name, "x-forwarded-for") {
                xff = xff.map { $0 + ", " + value } ?? value
                continue
            }
            if n == 9, ASCII.equalsCI(name, "forwarded") {
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
        if authority == nil, let fallbackHost, !sawHost {
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
        out.add(name: "X-Forwarded-For", list: xff, last: client)
        out.addForwarded(list: forwarded, node: client, quotedIPv6: client.utf8.contains(UInt8(ascii: ":")), scheme: scheme)
        out.add(name: "X-Forwarded-Proto", value: scheme)
        for (name, value) in extra { out.add(name: name, value: value) }
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

/// Receives the upstream request headers built by `HeaderRewriter`: an `HTTPHeaders`
/// (tests, tools) or the bytes of the HTTP/1.1 request head (the proxy's hot path).
protocol UpstreamHeaderSink {
    mutating func add(name: String, value: String)
    /// `<list>, <last>` when the client sent a list, else `<last>` (X-Forwarded-For).
    mutating func add(name: String, list: String?, last: String)
    /// The `Forwarded` value: `<list>, for=<node>;proto=<scheme>` (`list, ` only when present),
    /// with an IPv6 node written as `"[addr]"`.
    mutating func addForwarded(list: String?, node: String, quotedIPv6: Bool, scheme: String)
}

/// For sinks that take whole values (`HTTPHeaders`, the HTTP/2 head): the
/// two composed values as one string each.
protocol UpstreamValueSink: UpstreamHeaderSink {}

extension UpstreamValueSink {
    mutating func add(name: String, list: String?, last: String) {
        add(name: name, value: list.map { $0 + ", " + last } ?? last)
    }

    mutating func addForwarded(list: String?, node: String, quotedIPv6: Bool, scheme: String) {
        let n = quotedIPv6 ? "\"[\(node)]\"" : node
        let element = "for=\(n);proto=\(scheme)"
        add(name: "Forwarded", value: list.map { $0 + ", " + element } ?? element)
    }
}

extension HTTPHeaders: UpstreamValueSink {}

/// Writes an HTTP/1.1 request head straight into a `ByteBuffer` (no `HTTPHeaders`,
/// no `HTTPRequestHead`, no NIO encoder). Names must be tokens and values free of
/// CR, LF and NUL, as NIO's header validator requires; a violation marks the head invalid.
struct UpstreamHeadWriter: UpstreamHeaderSink {
    var buffer: ByteBuffer
    private(set) var isValid = true

    init(method: String, target: String, allocator: ByteBufferAllocator) {
        buffer = allocator.buffer(capacity: 512)
        isValid = Self.isToken(method) && Self.isTarget(target)
        buffer.writeString(method)
        buffer.writeInteger(UInt8(ascii: " "))
        buffer.writeString(target)
        buffer.writeStaticString(" HTTP/1.1\r\n")
    }

    mutating func add(name: String, value: String) {
        let copied = name.utf8.withContiguousStorageIfAvailable { n in
            value.utf8.withContiguousStorageIfAvailable { v in writeField(n, v) }
        }
        if let ok = copied ?? nil {
            if !ok { isValid = false }
            return
        }
        // Strings without contiguous UTF-8 (bridged): check, then copy.
        if !(Self.isToken(name) && Self.isFieldValue(value)) { isValid = false }
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        buffer.writeString(value)
        buffer.writeStaticString("\r\n")
    }

    /// `name: value\r\n` in one reserved write, every byte checked as it is
    /// copied (one pass over each, instead of a validation pass and four
    /// writes): false when the name is not a token or the value has a
    /// control character.
    private mutating func writeField(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = name.count + value.count + 4
        var ok = !name.isEmpty
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { out in
            var i = 0
            for b in name {
                if !ASCII.isTokenByte(b) { ok = false }
                out[i] = b
                i += 1
            }
            out[i] = UInt8(ascii: ":")
            out[i + 1] = UInt8(ascii: " ")
            i += 2
            for b in value {
                if b < 0x20 ? b != 0x09 : b == 0x7F { ok = false }
                out[i] = b
                i += 1
            }
            out[i] = UInt8(ascii: "\r")
            out[i + 1] = UInt8(ascii: "\n")
            return count
        }
        return ok
    }

    mutating func add(name: String, list: String?, last: String) {
        if !(Self.isToken(name) && Self.isFieldValue(last)) { isValid = false }
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        if let list {
            if !Self.isFieldValue(list) { isValid = false }
            buffer.writeString(list)
            buffer.writeStaticString(", ")
        }
        buffer.writeString(last)
        buffer.writeStaticString("\r\n")
    }

    mutating func addForwarded(list: String?, node: String, quotedIPv6: Bool, scheme: String) {
        if !(Self.isFieldValue(node) && Self.isFieldValue(scheme)) { isValid = false }
        buffer.writeStaticString("Forwarded: ")
        if let list {
            if !Self.isFieldValue(list) { isValid = false }
            buffer.writeString(list)
            buffer.writeStaticString(", ")
        }
        buffer.writeStaticString("for=")
        if quotedIPv6 { buffer.writeStaticString("\"[") }
        buffer.writeString(node)
        if quotedIPv6 { buffer.writeStaticString("]\"") }
        buffer.writeStaticString(";proto=")
        buffer.writeString(scheme)
        buffer.writeStaticString("\r\n")
    }

    /// Ends the head (empty line) and returns its bytes.
    mutating func finish() -> ByteBuffer {
        buffer.writeStaticString("\r\n")
        return buffer
    }

    // The checks of NIO's NIOHTTPRequestHeadersValidator, which this writer replaces.

    /// RFC 9110 token characters (method, header names).
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty && allBytes(s, ASCII.isTokenByte)
    }

    /// No control character but HTAB (CR/LF/NUL would split or smuggle requests).
    static func isFieldValue(_ s: String) -> Bool {
        allBytes(s) { b in b == UInt8(ascii: "\t") || (b >= 0x20 && b != 0x7F) }
    }

    /// The bytes RFC 3986 allows unencoded in a request target.
    static func isTarget(_ s: String) -> Bool {
        allBytes(s) { b in
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"),
                UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "@"), UInt8(ascii: "!"), UInt8(ascii: "$"),
                UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
                UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: "%"):
                return true
            default:
                return false
            }
        }
    }

    @inline(__always)
    private static func allBytes(_ s: String, _ ok: (UInt8) -> Bool) -> Bool {
        if let r = s.utf8.withContiguousStorageIfAvailable({ bytes in bytes.allSatisfy(ok) }) { return r }
        return s.utf8.allSatisfy(ok)
    }
}
