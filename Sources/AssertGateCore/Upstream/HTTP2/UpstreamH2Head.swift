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
    /// Indices into `regular` of the fields whose value is new with every
    /// request (the request id, the trust signature), -1 when unused: sent
    /// never-indexed, so they do not churn the HPACK table (each would be
    /// inserted, then push out a field that repeats). Two, inline: an array
    /// would be an allocation per request.
    private var unique = (-1, -1)
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
        isValid = UpstreamHeadWriter.isToken(m) && URISyntax.isTarget(target)
    }

    /// The header list in the order it is sent: pseudo-headers, then fields.
    var spans: [Span] {
        var out: [Span] = []
        forEachSpan { s, _ in out.append(s) }
        return out
    }

    /// The same, without an array, and whether each is to be sent never-indexed.
    func forEachSpan(_ body: (Span, _ neverIndexed: Bool) -> Void) {
        body(method, false)
        body(scheme, false)
        if let authority { body(authority, false) }
        body(path, false)
        for (i, s) in regular.enumerated() { body(s, i == unique.0 || i == unique.1) }
    }

    var count: Int { regular.count + (authority == nil ? 3 : 4) }

    mutating func add(name: String, value: String) { addField(name, value, checked: false) }

    /// A third unique field would go as an ordinary one (the gateway adds two).
    mutating func addUnique(name: String, value: String) {
        let before = regular.count
        addField(name, value, checked: false)
        guard regular.count > before else { return }
        if unique.0 < 0 { unique.0 = before } else if unique.1 < 0 { unique.1 = before }
    }

    /// nghttp2 has checked an HTTP/2 client's field and its name is lower
    /// case (RFC 9113 §8.2.1, HTTP messaging on in `HTTP2Session`): copied
    /// without a second look.
    mutating func addClientField(name: String, value: String) { addField(name, value, checked: clientFieldsChecked) }

    private mutating func addField(_ name: String, _ value: String, checked: Bool) {
        // Length first: most names are rejected by one integer compare.
        let n = name.utf8.count
        if n == 4, ASCII.equalsCI(name, "host") {
            if authority == nil { authority = append(":authority", value) }
            return
        }
        if Self.isConnectionSpecific(name, length: n) { return }
        regular.append(appendField(name, value, checked: checked))
    }

    /// The three forwarding fields of a client that sent none, rendered once
    /// per client address and scheme (the worker's cache) and copied.
    mutating func addForwarding(xff: String?, forwarded: String?, client: String, scheme: String) {
        guard xff == nil, forwarded == nil, let cache = forwarding else {
            return addForwardingLines(xff: xff, forwarded: forwarded, client: client, scheme: scheme)
        }
        let (fields, valid) = cache.http2.value(client: client, scheme: scheme) {
            var loose = UpstreamH2Head(fieldsOnly: ())
            loose.addForwardingLines(xff: nil, forwarded: nil, client: client, scheme: scheme)
            return ((loose.bytes, loose.regular), loose.isValid)
        }
        if !valid { isValid = false }
        let base = bytes.count
        bytes.append(contentsOf: fields.bytes)
        for f in fields.spans {
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

    /// Copies a field (bulk copies). Unless `checked`, the name is then
    /// lower-cased and checked in place and the value checked, as
    /// `UpstreamHeadWriter` checks them; an empty name is never sent.
    private mutating func appendField(_ name: String, _ value: String, checked: Bool) -> Span {
        // Read in place (`withUTF8` needs a mutable copy: a retain and release per string).
        let ns = bytes.count
        UpstreamHeadWriter.withBytes(name) { bytes.append(contentsOf: $0) }
        let vs = bytes.count
        UpstreamHeadWriter.withBytes(value) { bytes.append(contentsOf: $0) }
        var ok = vs > ns
        if ok, !checked {
            bytes.withUnsafeMutableBufferPointer { b in
                ASCII.tokenLowerTable.withUnsafeBufferPointer { t in
                    for i in ns..<vs {
                        let lower = t[Int(b[i])]
                        if lower == 0 { ok = false } else { b[i] = lower }
                    }
                }
                if !UpstreamHeadWriter.isFieldValue(UnsafeBufferPointer(rebasing: b[vs...])) { ok = false }
            }
        }
        if !ok { isValid = false }
        return (ns, vs - ns, vs, bytes.count - vs)
    }

    /// A pseudo-header or a field the gateway itself spells in lower case.
    private mutating func append(_ name: StaticString, _ value: String) -> Span {
        let ns = bytes.count
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        let vs = bytes.count
        // One bulk copy, then the check over the copy (not a checked append per byte).
        UpstreamHeadWriter.withBytes(value) { bytes.append(contentsOf: $0) }
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
