/// A request head for an HTTP/2 upstream, written by `HeaderRewriter` like
/// the HTTP/1.1 head (one rewriter decides what is forwarded, whatever the
/// upstream speaks), straight into the bytes nghttp2's header list points
/// at: names lower-cased as they are copied, `Host` turned into
/// `:authority`, the fields HTTP/2 forbids (RFC 9113 §8.2.2) left out, and
/// `te: trailers` added when the client asked for trailers (gRPC servers
/// require it). Every byte is checked as it is copied, as
/// `UpstreamHeadWriter` does for HTTP/1.1: a violation marks the head invalid.
struct UpstreamH2Head: UpstreamValueSink {
    typealias Span = (nameStart: Int, nameLength: Int, valueStart: Int, valueLength: Int)

    /// Names and values, back to back.
    private(set) var bytes: [UInt8] = []
    /// `:method`, `:scheme`, `:authority` (when there is one), `:path`: sent first.
    private var method: Span
    private var scheme: Span
    private var path: Span
    private var authority: Span?
    private(set) var regular: [Span] = []
    private(set) var isValid = true
    private let trailers: Bool

    /// `scheme`: `http` for h2c, `https` for h2. `trailers`: the client sent `TE: trailers`.
    init(method m: String, target: String, scheme s: String, trailers: Bool) {
        bytes.reserveCapacity(512)
        regular.reserveCapacity(16)
        self.trailers = trailers
        method = (0, 0, 0, 0)
        scheme = (0, 0, 0, 0)
        path = (0, 0, 0, 0)
        method = append(":method", m)
        scheme = append(":scheme", s)
        path = append(":path", target)
        isValid = UpstreamHeadWriter.isToken(m) && UpstreamHeadWriter.isTarget(target)
    }

    /// The header list in the order it is sent: pseudo-headers, then fields.
    var spans: [Span] {
        var out: [Span] = []
        forEachSpan { out.append($0) }
        return out
    }

    /// The same, without an array.
    func forEachSpan(_ body: (Span) -> Void) {
        body(method)
        body(scheme)
        if let authority { body(authority) }
        body(path)
        for s in regular { body(s) }
    }

    var count: Int { regular.count + (authority == nil ? 3 : 4) }

    mutating func add(name: String, value: String) {
        // Length first: most names are rejected by one integer compare.
        let n = name.utf8.count
        if n == 4, ASCII.equalsCI(name, "host") {
            if authority == nil { authority = append(":authority", value) }
            return
        }
        if Self.isConnectionSpecific(name, length: n) { return }
        regular.append(appendField(name, value))
    }

    /// Ends the head: `te: trailers` when the client asked for trailers.
    mutating func finish() {
        if trailers { regular.append(append("te", "trailers")) }
    }

    /// Copies a field, lower-casing the name and checking every byte as it
    /// goes (bulk copies, then one pass in place: no per-byte append).
    private mutating func appendField(_ name: String, _ value: String) -> Span {
        var name = name
        var value = value
        let ns = bytes.count
        var ok = true
        let span = name.withUTF8 { n in
            value.withUTF8 { v -> Span in
                bytes.append(contentsOf: n)
                let vs = bytes.count
                bytes.append(contentsOf: v)
                bytes.withUnsafeMutableBufferPointer { b in
                    for i in ns..<vs {
                        let c = b[i]
                        if !ASCII.isTokenByte(c) { ok = false }
                        b[i] = ASCII.lower(c)
                    }
                    for i in vs..<b.count {
                        let c = b[i]
                        if c < 0x20 ? c != 0x09 : c == 0x7F { ok = false }
                    }
                }
                return (ns, vs - ns, vs, v.count)
            }
        }
        if !ok || span.nameLength == 0 { isValid = false }
        return span
    }

    /// A pseudo-header or a field the gateway itself spells in lower case.
    private mutating func append(_ name: StaticString, _ value: String) -> Span {
        let ns = bytes.count
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        let vs = bytes.count
        for b in value.utf8 {
            if b < 0x20 ? b != 0x09 : b == 0x7F { isValid = false }
            bytes.append(b)
        }
        return (ns, vs - ns, vs, bytes.count - vs)
    }

    /// Fields HTTP/2 forbids (`TE` is added back as `trailers` by `finish`).
    private static func isConnectionSpecific(_ name: String, length n: Int) -> Bool {
        switch n {
        case 2: return ASCII.equalsCI(name, "te")
        case 7: return ASCII.equalsCI(name, "upgrade")
        case 10: return ASCII.equalsCI(name, "connection") || ASCII.equalsCI(name, "keep-alive")
        case 16: return ASCII.equalsCI(name, "proxy-connection")
        case 17: return ASCII.equalsCI(name, "transfer-encoding")
        default: return false
        }
    }

    /// The header list's (name, value) pairs, for tests and logs.
    var fields: [(String, String)] {
        spans.map {
            (String(decoding: bytes[$0.nameStart..<$0.nameStart + $0.nameLength], as: UTF8.self),
             String(decoding: bytes[$0.valueStart..<$0.valueStart + $0.valueLength], as: UTF8.self))
        }
    }
}
