/// A request head for an HTTP/2 upstream, written by `HeaderRewriter` like
/// the HTTP/1.1 head (one rewriter decides what is forwarded, whatever the
/// upstream speaks), straight into the bytes nghttp2's header list points
/// at: names lower-cased as they are copied, `Host` turned into
/// `:authority`, the fields HTTP/2 forbids (RFC 9113 §8.2.2) left out, and
/// `te: trailers` added when the client asked for trailers (gRPC servers
/// require it). Every byte is checked as it is copied, as
/// `UpstreamHeadWriter` does for HTTP/1.1: a violation marks the head invalid
/// (an HTTP/2 client's fields, which nghttp2 has checked, are copied as they
/// are: `ProxyRequest.fieldsChecked`).
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
    private let clientFieldsChecked: Bool
    private let forwarding: ForwardingCache?

    /// `scheme`: `http` for h2c, `https` for h2. `trailers`: the client sent
    /// `TE: trailers`. `clientFieldsChecked`, `forwarding`: as `UpstreamHeadWriter`'s.
    init(
        method m: String, target: String, scheme s: String, trailers: Bool, clientFieldsChecked: Bool = false,
        forwarding: ForwardingCache? = nil
    ) {
        bytes.reserveCapacity(512)
        regular.reserveCapacity(16)
        self.trailers = trailers
        self.clientFieldsChecked = clientFieldsChecked
        self.forwarding = forwarding
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

    /// nghttp2 has checked an HTTP/2 client's field and its name is lower
    /// case (RFC 9113 §8.2.1, HTTP messaging on in `HTTP2Session`): one copy.
    mutating func addClientField(name: String, value: String) {
        guard clientFieldsChecked else { return add(name: name, value: value) }
        let n = name.utf8.count
        if (n == 4 && ASCII.equalsCI(name, "host")) || Self.isConnectionSpecific(name, length: n) {
            return add(name: name, value: value)
        }
        var name = name
        var value = value
        let ns = bytes.count
        name.withUTF8 { bytes.append(contentsOf: $0) }
        let vs = bytes.count
        value.withUTF8 { bytes.append(contentsOf: $0) }
        if vs == ns { isValid = false }
        regular.append((ns, vs - ns, vs, bytes.count - vs))
    }

    /// The three forwarding fields of a client that sent none, rendered once
    /// per client address and scheme (the worker's cache) and copied.
    mutating func addForwarding(xff: String?, forwarded: String?, client: String, scheme: String) {
        guard xff == nil, forwarded == nil, let cache = forwarding else {
            return addForwardingLines(xff: xff, forwarded: forwarded, client: client, scheme: scheme)
        }
        if cache.h2Client != client || cache.h2Scheme != scheme || cache.h2Fields.isEmpty {
            var loose = UpstreamH2Head(fieldsOnly: ())
            loose.addForwardingLines(xff: nil, forwarded: nil, client: client, scheme: scheme)
            cache.h2Client = client
            cache.h2Scheme = scheme
            cache.h2Bytes = loose.bytes
            cache.h2Fields = loose.regular
            cache.h2Valid = loose.isValid
        }
        if !cache.h2Valid { isValid = false }
        let base = bytes.count
        bytes.append(contentsOf: cache.h2Bytes)
        for f in cache.h2Fields {
            regular.append((f.nameStart + base, f.nameLength, f.valueStart + base, f.valueLength))
        }
    }

    /// Fields alone (the forwarding cache's rendering).
    private init(fieldsOnly: Void) {
        trailers = false
        clientFieldsChecked = false
        forwarding = nil
        method = (0, 0, 0, 0)
        scheme = (0, 0, 0, 0)
        path = (0, 0, 0, 0)
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
        var value = value
        // One bulk copy, then the check over the copy (not a checked append per byte).
        value.withUTF8 { bytes.append(contentsOf: $0) }
        let ok = bytes.withUnsafeBufferPointer { UpstreamHeadWriter.isFieldValue(UnsafeBufferPointer(rebasing: $0[vs...])) }
        if !ok { isValid = false }
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
