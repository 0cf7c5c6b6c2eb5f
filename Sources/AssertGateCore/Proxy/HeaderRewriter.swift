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
        // The usual case (nothing to drop) decided over each name's bytes.
        snapshot.trustPrefixLower.withUnsafeBufferPointer { prefix in
            for (name, _) in headers where UpstreamHeadWriter.withBytes(name, { Self.needsSanitizing($0, prefix) }) {
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

    /// `name` has a `_` or starts with the trust prefix (any case): what
    /// `sanitizeClientHeaders`' second loop looks at.
    @inline(__always)
    private static func needsSanitizing(_ name: UnsafeBufferPointer<UInt8>, _ lowerPrefix: UnsafeBufferPointer<UInt8>) -> Bool {
        if name.count >= lowerPrefix.count {
            var k = 0
            while k < lowerPrefix.count, ASCII.lower(name[k]) == lowerPrefix[k] { k += 1 }
            if k == lowerPrefix.count { return true }
        }
        return name.contains(underscore)
    }

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

    /// Builds the upstream request headers from the client's (already
    /// trust-stripped) headers: `request`'s own, then what the gateway adds
    /// for `route` (`extra`: the trust headers).
    static func upstreamRequestHeaders(
        for request: ProxyRequest, route: RouteConfig, extra: [(name: String, value: String)],
        bodyFraming: RequestBodyFraming, fallbackHost: String? = nil
    ) -> HTTPHeaders {
        var out = HTTPHeaders()
        out.reserveCapacity(request.headers.count + 6 + extra.count)
        writeUpstreamRequestHeaders(
            into: &out, for: request, route: route, extra: extra, bodyFraming: bodyFraming, fallbackHost: fallbackHost)
        return out
    }

    /// The whole HTTP/1.1 request head as bytes (request line, the headers of
    /// `upstreamRequestHeaders`, empty line); nil when a name, value or the target
    /// is not valid to send (NIO's header validator would have refused it too).
    static func upstreamRequestHead(
        for request: ProxyRequest, route: RouteConfig, extra: [(name: String, value: String)],
        bodyFraming: RequestBodyFraming, fallbackHost: String? = nil, allocator: ByteBufferAllocator,
        forwarding: ForwardingCache? = nil
    ) -> UpstreamRequestHead? {
        // Sized once: the fields as they are plus room for what is added.
        var size = request.method.utf8.count + request.target.utf8.count + (request.authority?.utf8.count ?? 0)
            + request.requestId.utf8.count + 2 * (request.clientAddress?.utf8.count ?? 7) + 192
        for (name, value) in request.headers { size += name.utf8.count + value.utf8.count + 4 }
        for (name, value) in extra { size += name.utf8.count + value.utf8.count + 4 }
        var bytes = allocator.buffer(capacity: size)
        let valid = UpstreamHeadWriter.write(
            into: &bytes, capacity: size, clientFieldsChecked: request.fieldsChecked, forwarding: forwarding
        ) { writer in
            writer.requestLine(method: request.method, target: request.target)
            writeUpstreamRequestHeaders(
                into: &writer, for: request, route: route, extra: extra, bodyFraming: bodyFraming,
                fallbackHost: fallbackHost)
            writer.finish()
        }
        guard valid else { return nil }
        return UpstreamRequestHead(bytes: bytes, isHead: request.method == "HEAD", chunked: bodyFraming == .chunked)
    }

    /// The same head for an HTTP/2 upstream (`upstreamScheme`: `http` for
    /// h2c, `https` for h2); nil when a byte could not be sent.
    static func upstreamH2Head(
        for request: ProxyRequest, route: RouteConfig, extra: [(name: String, value: String)],
        bodyFraming: RequestBodyFraming, fallbackHost: String? = nil, upstreamScheme: String, trailers: Bool,
        forwarding: ForwardingCache? = nil
    ) -> UpstreamH2Head? {
        var head = UpstreamH2Head(
            method: request.method, target: request.target, scheme: upstreamScheme, trailers: trailers,
            clientFieldsChecked: request.fieldsChecked, forwarding: forwarding)
        writeUpstreamRequestHeaders(
            into: &head, for: request, route: route, extra: extra, bodyFraming: bodyFraming, fallbackHost: fallbackHost)
        head.finish()
        return head.isValid ? head : nil
    }

    static func writeUpstreamRequestHeaders<Sink: UpstreamHeaderSink>(
        into out: inout Sink, for request: ProxyRequest, route: RouteConfig, extra: [(name: String, value: String)],
        bodyFraming: RequestBodyFraming, fallbackHost: String?
    ) {
        let client = request.headers
        let authority = request.authority
        let snapshot = request.snapshot
        let listed = connectionTokens(client)
        if let authority { out.add(name: "Host", value: authority) }
        var xff: String?
        var forwarded: String?
        for (name, value) in client {
            let n = name.utf8.count
            // Host is rendered from the authority above (the intake takes it
            // from the field): a client's own is never copied.
            if n == 4, ASCII.equalsCI(name, "host") { continue }
            if isHopByHop(name) { continue }
            if !listed.isEmpty, isListed(name, listed) { continue }
            // Length first: most names are rejected by one integer compare.
            if (n == 12 && ASCII.equalsCI(name, "x-request-id")) || (n == 17 && ASCII.equalsCI(name, "x-forwarded-proto"))
                || (n == 14 && ASCII.equalsCI(name, "content-length")) || (n == 6 && ASCII.equalsCI(name, "expect"))
            {
                continue
            }
            // Addresses only the gateway knows, which it does not set: a
            // client's would pass for the gateway's word (`X-Forwarded-For`
            // and `Forwarded` carry the client's address).
            if (n == 9 && ASCII.equalsCI(name, "x-real-ip")) || (n == 16 && ASCII.equalsCI(name, "x-forwarded-host"))
                || (n == 16 && ASCII.equalsCI(name, "x-forwarded-port"))
            {
                continue
            }
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
            out.addClientField(name: name, value: value)
        }
        if authority == nil, let fallbackHost {
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
        out.addUnique(name: "X-Request-Id", value: request.requestId)
        out.addForwarding(
            xff: xff, forwarded: forwarded, client: request.clientAddress ?? "unknown", scheme: request.scheme)
        for (name, value) in extra {
            if let signature = snapshot.trustSignatureLower, ASCII.equalsCI(name, lower: signature) {
                out.addUnique(name: name, value: value)
            } else {
                out.add(name: name, value: value)
            }
        }
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
    /// A field from the client's header list (`add(name:value:)` unless the sink knows better).
    mutating func addClientField(name: String, value: String)
    /// `X-Forwarded-For`, `Forwarded` and `X-Forwarded-Proto` (`addForwardingLines` unless the sink knows better).
    mutating func addForwarding(xff: String?, forwarded: String?, client: String, scheme: String)
    /// A field whose value is new with every request (the request id, the
    /// trust signature): `add(name:value:)` unless the sink knows better.
    mutating func addUnique(name: String, value: String)
}

extension UpstreamHeaderSink {
    mutating func addClientField(name: String, value: String) { add(name: name, value: value) }

    mutating func addUnique(name: String, value: String) { add(name: name, value: value) }

    mutating func addForwarding(xff: String?, forwarded: String?, client: String, scheme: String) {
        addForwardingLines(xff: xff, forwarded: forwarded, client: client, scheme: scheme)
    }

    mutating func addForwardingLines(xff: String?, forwarded: String?, client: String, scheme: String) {
        add(name: "X-Forwarded-For", list: xff, last: client)
        addForwarded(list: forwarded, node: client, quotedIPv6: client.utf8.contains(UInt8(ascii: ":")), scheme: scheme)
        add(name: "X-Forwarded-Proto", value: scheme)
    }
}

/// The last rendering of the forwarding fields, per kind of upstream head
/// (`addForwarding` of `UpstreamHeadWriter` and `UpstreamH2Head`): one per
/// worker, so loop-confined; a connection's requests hit it.
final class ForwardingCache {
    /// One head kind's rendering, for the client address and scheme it was made for.
    struct Rendering<Value> {
        private(set) var client = ""
        private(set) var scheme = ""
        private var last: (value: Value, valid: Bool)?

        /// The last rendering when it was for `client` and `scheme`, else
        /// `render`'s, kept for the next request.
        mutating func value(client: String, scheme: String, render: () -> (Value, Bool)) -> (Value, valid: Bool) {
            if let last, self.client == client, self.scheme == scheme { return last }
            let made = render()
            self.client = client
            self.scheme = scheme
            last = made
            return made
        }
    }
    /// HTTP/1.1: the three lines as bytes, copied with one reserved write
    /// (not a `ByteBuffer`: `writeBuffer` cost ~350 instructions).
    var http1 = Rendering<[UInt8]>()
    /// HTTP/2: lower-case names and values back to back, and where each is.
    var http2 = Rendering<(bytes: [UInt8], spans: [UpstreamH2Head.Span])>()
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
/// The whole head is written into memory the buffer lends for one
/// `writeWithUnsafeMutableBytes` (`write(into:)`): raw copies, where a
/// `ByteBuffer` write per line cost ~150 instructions of NIO's uniqueness,
/// capacity and exclusivity checks.
struct UpstreamHeadWriter: UpstreamHeaderSink {
    /// The lent memory: only ever inside `write(into:)`'s closure.
    private let out: UnsafeMutableRawBufferPointer
    private var count = 0
    /// A line did not fit: `write(into:)` writes the head again with more room.
    private var overflowed = false
    private(set) var isValid = true
    /// The client's names and values were checked on intake (see `addClientField`).
    private let clientFieldsChecked: Bool
    private let forwarding: ForwardingCache?

    private init(out: UnsafeMutableRawBufferPointer, clientFieldsChecked: Bool, forwarding: ForwardingCache?) {
        self.out = out
        self.clientFieldsChecked = clientFieldsChecked
        self.forwarding = forwarding
    }

    /// Appends what `body` writes to `buffer`, in memory the buffer lends
    /// for this call: room for `capacity` bytes first, twice as much (and
    /// `body` again) while it does not fit. Returns whether every byte was valid.
    /// `clientFieldsChecked`: see `ProxyRequest.fieldsChecked`. `forwarding`:
    /// the last rendering of the forwarding fields (`addForwarding`).
    static func write(
        into buffer: inout ByteBuffer, capacity: Int, clientFieldsChecked: Bool = false,
        forwarding: ForwardingCache? = nil, _ body: (inout UpstreamHeadWriter) -> Void
    ) -> Bool {
        var room = max(capacity, 64)
        while true {
            var fitted = true
            var valid = true
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { lent in
                var w = UpstreamHeadWriter(out: lent, clientFieldsChecked: clientFieldsChecked, forwarding: forwarding)
                body(&w)
                fitted = !w.overflowed
                valid = w.isValid
                return fitted ? w.count : 0
            }
            if fitted { return valid }
            room *= 2
        }
    }

    /// The request line.
    mutating func requestLine(method: String, target: String) {
        Self.withBytes(method) { m in
            Self.withBytes(target) { t in put(m, " ", t, " HTTP/1.1\r\n") }
        }
        if !(Self.isToken(method) && URISyntax.isTarget(target)) { isValid = false }
    }

    mutating func add(name: String, value: String) {
        Self.withBytes(name) { n in
            Self.withBytes(value) { v in
                if !(Self.isToken(n) && Self.isFieldValue(v)) { isValid = false }
                put(n, ": ", v, "\r\n")
            }
        }
    }

    /// A field from the client's header list. Copied without a second look
    /// when the front end already refused bad bytes: HTTP/2 intake only
    /// (`ProxyRequest.fieldsChecked`: nghttp2's HTTP messaging rules, on in
    /// `HTTP2Session`, reset a stream whose name is not a lower-case token or
    /// whose value has NUL, CR, LF, another control byte but HTAB, or DEL,
    /// before `cbHeader` sees it). The HTTP/1.1 front end's fields are checked here.
    mutating func addClientField(name: String, value: String) {
        guard clientFieldsChecked else { return add(name: name, value: value) }
        Self.withBytes(name) { n in
            Self.withBytes(value) { v in put(n, ": ", v, "\r\n") }
        }
    }

    mutating func add(name: String, list: String?, last: String) {
        Self.withBytes(name) { n in
            Self.withBytes(list ?? "") { l in
                Self.withBytes(last) { v in
                    if !(Self.isToken(n) && Self.isFieldValue(v) && Self.isFieldValue(l)) { isValid = false }
                    if list == nil {
                        put(n, ": ", v, "\r\n")
                    } else {
                        put(n, ": ", l, ", ")
                        put(v, "\r\n")
                    }
                }
            }
        }
    }

    mutating func addForwarded(list: String?, node: String, quotedIPv6: Bool, scheme: String) {
        Self.withBytes(list ?? "") { l in
            Self.withBytes(node) { n in
                Self.withBytes(scheme) { s in
                    if !(Self.isFieldValue(n) && Self.isFieldValue(s) && Self.isFieldValue(l)) { isValid = false }
                    if list != nil { put("Forwarded: ", l, ", ") } else { put("Forwarded: ") }
                    put(quotedIPv6 ? "for=\"[" : "for=", n, quotedIPv6 ? "]\";proto=" : ";proto=", s)
                    put("\r\n")
                }
            }
        }
    }

    /// Without lists from the client, the three lines depend only on the
    /// client's address and scheme, which do not change during a connection:
    /// copied from the last rendering when it was for the same pair.
    mutating func addForwarding(xff: String?, forwarded: String?, client: String, scheme: String) {
        guard xff == nil, forwarded == nil, let cache = forwarding else {
            return addForwardingLines(xff: xff, forwarded: forwarded, client: client, scheme: scheme)
        }
        let (lines, valid) = cache.http1.value(client: client, scheme: scheme) {
            let room = 2 * client.utf8.count + 80
            var b = ByteBufferAllocator().buffer(capacity: room)
            let valid = Self.write(into: &b, capacity: room) {
                $0.addForwardingLines(xff: nil, forwarded: nil, client: client, scheme: scheme)
            }
            return (Array(b.readableBytesView), valid)
        }
        if !valid { isValid = false }
        lines.withUnsafeBufferPointer { put($0, "") }
    }

    /// Ends the head (empty line).
    mutating func finish() {
        put("\r\n")
    }

    // MARK: raw writes

    /// The bytes of `s`, contiguous (a bridged string is made native first).
    @inline(__always)
    static func withBytes<R>(_ s: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let r = s.utf8.withContiguousStorageIfAvailable(body) { return r }
        var copy = s
        return copy.withUTF8(body)
    }

    /// Up to four pieces.
    private mutating func put(
        _ a: UnsafeBufferPointer<UInt8>, _ b: StaticString, _ c: UnsafeBufferPointer<UInt8>, _ d: StaticString
    ) {
        put(a, Self.bytes(b), c, Self.bytes(d))
    }

    private mutating func put(_ a: StaticString, _ b: UnsafeBufferPointer<UInt8>, _ c: StaticString, _ d: UnsafeBufferPointer<UInt8>) {
        put(Self.bytes(a), b, Self.bytes(c), d)
    }

    /// Four pieces copied into the lent memory; past its end nothing is
    /// written and the head is marked to be written again with more room.
    private mutating func put(
        _ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>,
        _ c: UnsafeBufferPointer<UInt8>, _ d: UnsafeBufferPointer<UInt8>
    ) {
        let n = a.count + b.count + c.count + d.count
        guard !overflowed, n <= out.count - count, let o = out.baseAddress else {
            overflowed = true
            return
        }
        var i = count
        i += Self.copy(a, to: o + i)
        i += Self.copy(b, to: o + i)
        i += Self.copy(c, to: o + i)
        i += Self.copy(d, to: o + i)
        count = i
    }

    /// A literal's bytes (the writer's literals are ASCII text: they have a pointer).
    @inline(__always)
    private static func bytes(_ s: StaticString) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount)
    }

    private mutating func put(_ a: StaticString, _ b: UnsafeBufferPointer<UInt8>, _ c: StaticString) {
        put(a, b, c, UnsafeBufferPointer(start: nil, count: 0))
    }

    private mutating func put(_ a: UnsafeBufferPointer<UInt8>, _ b: StaticString) {
        put(a, b, UnsafeBufferPointer(start: nil, count: 0), "")
    }

    private mutating func put(_ a: StaticString) {
        put(UnsafeBufferPointer(start: nil, count: 0), a, UnsafeBufferPointer(start: nil, count: 0), "")
    }

    @inline(__always)
    private static func copy(_ s: UnsafeBufferPointer<UInt8>, to o: UnsafeMutableRawPointer) -> Int {
        if let base = s.baseAddress, s.count > 0 { o.copyMemory(from: base, byteCount: s.count) }
        return s.count
    }


    // The checks of NIO's NIOHTTPRequestHeadersValidator, which this writer replaces.

    /// RFC 9110 token characters (method, header names).
    static func isToken(_ s: String) -> Bool {
        withBytes(s) { isToken($0) }
    }

    static func isToken(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        !s.isEmpty && ASCII.allTokenBytes(s)
    }

    /// No control character but HTAB (CR/LF/NUL would split or smuggle requests).
    static func isFieldValue(_ s: String) -> Bool {
        withBytes(s) { isFieldValue($0) }
    }

    static func isFieldValue(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        ASCII.fieldValueRun(s, from: 0) == s.count
    }
}
