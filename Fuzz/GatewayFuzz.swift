// libFuzzer entry point for the gateway's parsers of attacker-controlled bytes.
// Linked by run.sh against an AssertGateCore built with `--sanitize=fuzzer
// --sanitize=address` in debug (testing enabled), so internal parsers are
// reachable through `@testable import`.
//
// Input layout: byte 0 picks the parser (mod `FuzzTarget.allCases.count`),
// the rest is that parser's input. Besides "never traps", each case checks
// invariants a wrong-but-quiet parser would break; a broken invariant aborts.
@testable import AssertGateCore
import AssertGateRedis
import NIOCore
import NIOHTTP1

enum FuzzTarget: UInt8, CaseIterable {
    case challengeBody = 0
    case attestBody
    case assertionHeaders
    case codecs
    case config
    case resp
    case headerRewrite
    case valueParsers
    case upstreamResponse
    case routingPath
    case deviceCheck
    case upstreamH2
    case serverH2
}

/// Aborts with a message libFuzzer shows next to the crash input.
func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("invariant broken: \(message())") }
}

/// `name: value` lines (LF or CRLF); a line without a colon is a name with an empty value.
func headerLines(_ bytes: ArraySlice<UInt8>) -> [(String, String)] {
    var out: [(String, String)] = []
    for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).prefix(64) {
        var l = line
        if l.last == UInt8(ascii: "\r") { l = l.dropLast() }
        if let colon = l.firstIndex(of: UInt8(ascii: ":")), colon != l.startIndex {
            var value = l[(colon + 1)...]
            while value.first == UInt8(ascii: " ") { value = value.dropFirst() }
            out.append((String(decoding: l[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self)))
        } else {
            out.append((String(decoding: l, as: UTF8.self), ""))
        }
    }
    return out
}

/// A config with a trust prefix, an assertion-header route and upstreams, for the header rewriter.
let fuzzSnapshot: GatewaySnapshot? = {
    let yaml = """
        listeners: [{address: 127.0.0.1:8080}]
        apps: [{appId: ABCDE12345.com.example.app, environments: [development]}]
        store: {memory: {}}
        upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
        routes:
          - {match: {prefix: /api/}, upstream: api, mode: enforce}
          - {match: {prefix: /}, upstream: api, mode: passthrough}
        """
    guard let config = try? ConfigLoader(environment: [:]).load(yaml: yaml, filename: "/nonexistent/fuzz.yaml") else {
        return nil
    }
    return try? GatewaySnapshot.build(config: config)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func gatewayFuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let all = UnsafeBufferPointer(start: data, count: size)
    guard let target = FuzzTarget(rawValue: all[0] % UInt8(FuzzTarget.allCases.count)) else { return 0 }
    let bytes = Array(all[1...])
    switch target {
    case .challengeBody: fuzzChallengeBody(bytes)
    case .attestBody: fuzzAttestBody(bytes)
    case .assertionHeaders: fuzzAssertionHeaders(bytes)
    case .codecs: fuzzCodecs(bytes)
    case .config: fuzzConfig(bytes)
    case .resp: fuzzRESP(bytes)
    case .headerRewrite: fuzzHeaderRewrite(bytes)
    case .valueParsers: fuzzValueParsers(bytes)
    case .upstreamResponse: fuzzUpstreamResponse(bytes)
    case .routingPath: fuzzRoutingPath(bytes)
    case .deviceCheck: fuzzDeviceCheck(bytes)
    case .upstreamH2: fuzzUpstreamH2(bytes)
    case .serverH2: fuzzServerH2(bytes)
    }
    return 0
}

func fuzzChallengeBody(_ bytes: [UInt8]) {
    guard let request = try? ChallengeRequest.parse(bytes) else { return }
    check(request.keyId.count == 32, "challenge keyId of \(request.keyId.count) bytes")
    check(bytes.count <= ChallengeRequest.maxBodyBytes, "challenge body over the limit accepted")
}

func fuzzAttestBody(_ bytes: [UInt8]) {
    guard let request = try? AttestRequest.parse(bytes) else { return }
    check(request.keyId.count == 32, "attest keyId of \(request.keyId.count) bytes")
    check(ChallengeCodec.isWellFormed(request.challenge), "attest accepted a malformed challenge")
    check(request.userId.map { !$0.isEmpty && $0.utf8.count <= AttestRequest.maxUserIdBytes } ?? true, "bad userId accepted")
    check(request.attestation.count <= AttestRequest.maxBodyBytes, "attestation over the body limit")
}

func fuzzAssertionHeaders(_ bytes: [UInt8]) {
    guard let flags = bytes.first else { return }
    let lines = headerLines(bytes.dropFirst())
    var names = AssertionHeaderNames()
    // Bit 1: take the three header names from the first three lines (a config may rename them).
    var pairs = lines[...]
    if flags & 2 != 0, lines.count >= 3 {
        names.keyId = lines[0].0
        names.assertion = lines[1].0
        names.challenge = lines[2].0
        pairs = lines.dropFirst(3)
    }
    let challengeRequired = flags & 1 != 0
    let lookup: (String) -> String? = { name in
        pairs.first { $0.0.lowercased() == name }?.1
    }
    guard let parsed = try? AssertionHeaders.parse(names: names, challengeRequired: challengeRequired, lookup: lookup)
    else { return }
    check(parsed.keyId.count == 32, "header keyId of \(parsed.keyId.count) bytes")
    check(parsed.assertion.count <= AssertionHeaders.maxAssertionBytes, "assertion over 4 KiB accepted")
    if challengeRequired {
        check(parsed.challenge.map(ChallengeCodec.isWellFormed) == true, "required challenge missing or malformed")
    } else {
        check(parsed.challenge == nil, "challenge read on a route without one")
    }
}

func fuzzCodecs(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)

    if let keyId = try? KeyIdCodec.decode(text, reason: .malformedHeader) {
        check(keyId.count == 32, "keyId of \(keyId.count) bytes")
        let canonical = KeyIdCodec.encode(keyId)
        check((try? KeyIdCodec.decode(canonical, reason: .malformedHeader)) == keyId, "keyId does not round-trip")
    }

    if ChallengeCodec.isWellFormed(text) {
        check(text.utf8.count == 43, "challenge of \(text.utf8.count) characters accepted")
    }

    let encoded = PercentEncoding.encode(text)
    check(encoded.utf8.allSatisfy { $0 < 0x80 }, "percent-encoding left a non-ASCII byte")
    check(RedisURL.percentDecode(encoded[...]) == text, "percent-encoding does not round-trip")

    if RequestId.isValid(text) {
        check(RequestId.resolve(text) == text, "a valid request id was replaced")
    } else {
        let fresh = RequestId.resolve(text)
        check(RequestId.isValid(fresh) && fresh != text, "an invalid request id was kept")
    }
    // Substrings (the HTTP/1 path hands these in) must agree with Strings.
    check(RequestId.isValid(text[...]) == RequestId.isValid(text), "Substring and String disagree")

    if let canonical = AdminKeyId.canonical(pathComponent: text[...]) {
        check(AdminKeyId.canonical(pathComponent: canonical[...]) == canonical, "admin keyId is not canonical")
    }
    _ = RedisURL.percentDecode(text[...])
    _ = ClientData.assert(method: text, path: text, challenge: text, bodyHash: text)
    _ = ClientData.attest(challenge: text, userId: text)
}

func fuzzConfig(_ bytes: [UInt8]) {
    // Only valid UTF-8 reaches the YAML parser (ConfigLoader.load(path:) refuses the rest).
    guard let yaml = String(validating: bytes, as: UTF8.self) else { return }
    // A nonexistent base directory keeps relative `{file: …}` paths from reading anything.
    let loader = ConfigLoader(environment: ["FUZZ_SECRET": "fuzz-secret-value-0123456789abcdef"])
    do {
        let config = try loader.load(yaml: yaml, filename: "/nonexistent/fuzz.yaml")
        _ = GatewaySnapshot(config: config, enforcement: nil)
    } catch {
        check(!error.diagnostics.isEmpty, "config error without diagnostics")
    }
}

func fuzzRESP(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let payload = Array(bytes.dropFirst())
    // Small limits half the time so the fuzzer reaches every limit quickly.
    let limits = first & 0x80 != 0
        ? RESPLimits(maxBulkLength: 64, maxArrayCount: 8, maxDepth: 3, maxReplyBytes: 512, maxTotalElements: 16, maxLineLength: 32)
        : RESPLimits.default
    // Feed in chunks of 1...16 bytes (low bits of byte 0) so split headers and CRLFs are exercised.
    let chunk = Int(first & 0x0F) + 1
    guard let reader = try? RESPReader(limits: limits) else { return }
    var offset = 0
    stream: while offset < payload.count {
        let end = min(offset + chunk, payload.count)
        let ok = payload[offset..<end].withUnsafeBytes { raw -> Bool in
            (try? reader.feed(raw)) != nil
        }
        if !ok { break }
        offset = end
        while true {
            let value: RESPValue?
            do {
                value = try reader.next()
            } catch {
                break stream
            }
            guard let value else { break }
            checkWithin(value, limits: limits, depth: 0)
        }
    }
}

/// A reply the reader hands out must respect the limits the scanner enforces.
func checkWithin(_ value: RESPValue, limits: RESPLimits, depth: Int) {
    switch value {
    case .bulk(let b):
        check(b.count <= limits.maxBulkLength, "bulk of \(b.count) bytes passed the scanner")
    case .array(let elements):
        check(depth < limits.maxDepth, "array nested \(depth + 1) deep passed the scanner")
        check(elements.count <= limits.maxArrayCount, "array of \(elements.count) passed the scanner")
        for e in elements { checkWithin(e, limits: limits, depth: depth + 1) }
    case .status(let s), .error(let s):
        // Invalid UTF-8 turns into U+FFFD (3 bytes), so count scalars: at most one per wire byte.
        check(s.unicodeScalars.count <= limits.maxLineLength, "line of \(s.unicodeScalars.count) scalars passed the scanner")
    case .integer, .null:
        break
    }
}

func fuzzHeaderRewrite(_ bytes: [UInt8]) {
    guard let snapshot = fuzzSnapshot, let first = bytes.first else { return }
    let lines = headerLines(bytes.dropFirst())
    var headers = HTTPHeaders()
    // Only token names reach HTTPHeaders: nghttp2 (HTTP messaging on) and
    // llhttp refuse the rest before the gateway sees them.
    for (name, value) in lines where isToken(name) { headers.add(name: name, value: value) }

    // The front ends' intake: the trust prefix and (default `drop`) every name with `_` go.
    guard HeaderRewriter.sanitizeClientHeaders(&headers, snapshot: snapshot) else { return }
    for (name, _) in headers {
        check(!ASCII.hasPrefixCI(name, lowerPrefix: snapshot.trustPrefixLower), "trust-prefixed header survived")
        check(!name.utf8.contains(UInt8(ascii: "_")), "underscore header \(name) survived")
    }
    let path = lines.first?.1 ?? "/"
    let route = snapshot.route(method: lines.first?.0 ?? "GET", path: path[...]) ?? snapshot.config.routes.first
    let framing: RequestBodyFraming
    switch first & 3 {
    case 0: framing = .none
    case 1: framing = .empty
    case 2: framing = .contentLength(Int(first))
    default: framing = .chunked
    }
    let listed = HeaderRewriter.connectionTokens(headers)
    if let route {
        let request = ProxyRequest(
            method: "POST", target: "/fuzz?x=1", authority: first & 4 != 0 ? "api.example" : nil, scheme: "https",
            headers: headers, requestId: "fuzz-request", clientAddress: first & 8 != 0 ? "::1" : "127.0.0.1",
            snapshot: snapshot)
        let up = HeaderRewriter.upstreamRequestHeaders(
            for: request, route: route, extra: [], bodyFraming: framing, fallbackHost: "fallback.example")
        for (name, _) in up {
            check(!HeaderRewriter.isHopByHop(name) || ASCII.equalsCI(name, "transfer-encoding"), "hop-by-hop \(name) forwarded")
            // Headers the gateway itself adds may share a name with a listed token.
            let added = ["host", "content-length", "transfer-encoding", "x-request-id", "x-forwarded-for", "forwarded",
                "x-forwarded-proto"]
            check(added.contains(name.lowercased()) || !HeaderRewriter.isListed(name, listed), "Connection-listed \(name) forwarded")
        }
        check(up[canonicalForm: "x-request-id"] == ["fuzz-request"], "X-Request-Id not replaced")
        // The same head for an HTTP/2 upstream: pseudo-headers first, in
        // order, lower-case names, nothing HTTP/2 forbids.
        if let h2 = HeaderRewriter.upstreamH2Head(
            for: request, route: route, extra: [], bodyFraming: framing, fallbackHost: "fallback.example",
            upstreamScheme: "http", trailers: first & 16 != 0)
        {
            let fields = h2.fields
            let pseudo = fields.prefix { $0.0.hasPrefix(":") }.map(\.0)
            check(pseudo == [":method", ":scheme", ":authority", ":path"], "pseudo-headers \(pseudo)")
            check(fields.filter { $0.0.hasPrefix(":") }.count == 4, "a pseudo-header among the fields")
            for (name, value) in fields.dropFirst(4) {
                check(name == name.lowercased(), "upper-case name \(name) to an HTTP/2 upstream")
                check(!["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"].contains(name),
                    "\(name) sent to an HTTP/2 upstream")
                check(name != "te" || value == "trailers", "te: \(value) sent to an HTTP/2 upstream")
            }
        }
    }
    // The same fields as an upstream's response head (UpstreamResponseParser): none
    // of those dropped on the way up may reach the client on the way down.
    var head = Array("HTTP/1.1 200 OK\r\n".utf8)
    var sent = HTTPHeaders()
    for (name, value) in headers where UpstreamHeadWriter.isFieldValue(value) {
        head += Array(name.utf8) + Array(": ".utf8) + Array(value.utf8) + Array("\r\n".utf8)
        sent.add(name: name, value: value)
    }
    let listedDown = HeaderRewriter.connectionTokens(sent)
    head += Array("\r\n".utf8)
    if let parsed = try? UpstreamResponseParser.parseHead(head) {
        parsed.head.forEachForwarded { name, _ in
            let n = String(decoding: name, as: UTF8.self)
            check(!HeaderRewriter.isHopByHop(n) && n != "x-request-id", "hop-by-hop \(n) sent to the client")
            check(!HeaderRewriter.isListed(n, listedDown), "Connection-listed \(n) sent to the client")
        }
    }
}

/// RFC 9110 `token` (tchar+).
func isToken(_ name: String) -> Bool {
    !name.isEmpty && name.utf8.allSatisfy { b in
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }
}

func fuzzValueParsers(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    if let cap = GRPCTimeout.parse(text) {
        check(cap.nanoseconds >= 0, "negative grpc-timeout")
        check(text.utf8.count <= 9, "grpc-timeout over 8 digits accepted")
    }
    if let amount = try? DurationParser.parse(text) {
        check(amount.nanoseconds >= 0, "negative duration parsed")
        let again = try? DurationParser.parse(DurationParser.format(amount))
        check(again == amount, "duration \(amount) does not round-trip through format")
    }
    if let size = try? SizeParser.parse(text) {
        check(size >= 0, "negative size parsed")
        check((try? SizeParser.parse(SizeParser.format(size))) == size, "size \(size) does not round-trip")
    }
    if case .success(let url) = RedisURL.parse(text) {
        _ = url
    }
    _ = RedisURL.redacted(text)
    // An authority the intake lets through is sent as Host: it must never
    // carry what would end the field or name a path or another site.
    if URISyntax.isAuthority(text) {
        let bad: Set<UInt8> = [0, 9, 10, 13, 32, UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "@")]
        check(!text.isEmpty && !text.utf8.contains(where: { bad.contains($0) || $0 >= 0x80 }), "authority \(text.debugDescription) accepted")
    }
    if URISyntax.isTarget(text) {
        check(!text.utf8.contains(where: { $0 <= 32 || $0 >= 0x7F || $0 == UInt8(ascii: "#") }), "target \(text.debugDescription) accepted")
    }
    // A bundle version from an assertion against a rule's minimum (risk.md
    // §6.2): the order must be total and antisymmetric on any text.
    if let dot = text.firstIndex(of: "|") {
        let a = AppVersion(String(text[..<dot]))
        let b = AppVersion(String(text[text.index(after: dot)...]))
        check(!(a < b && b < a), "app versions \(a) and \(b) are each below the other")
        check((a < b) || (b < a) || a == b, "app versions \(a) and \(b) are unordered")
    }
}

/// What feeding a response gave: compared between one read and many.
struct ResponseOutcome: Equatable {
    var heads: [Int] = []
    var body: [UInt8] = []
    var ends = 0
    var failed = false
}

/// Upstream responses: flags byte (low nibble + 1 = read size, 0x80 = answer to HEAD)
/// then the bytes. The parser must report the same thing whatever the read size,
/// never hand out a field outside its head, and never forward a hop-by-hop field.
func fuzzUpstreamResponse(_ bytes: [UInt8]) {
    guard let flags = bytes.first else { return }
    let payload = Array(bytes.dropFirst())
    let isHead = flags & 0x80 != 0
    func feed(chunk: Int) -> ResponseOutcome {
        var parser = UpstreamResponseParser()
        parser.expectResponse(isHead: isHead)
        var out = ResponseOutcome()
        var offset = 0
        do {
            while offset < payload.count {
                let end = min(offset + chunk, payload.count)
                var buffer = ByteBuffer(bytes: payload[offset..<end])
                offset = end
                events: while true {
                    switch try parser.next(&buffer) {
                    case .needMore: break events
                    case .interim(let head):
                        check(head.status > 101 && head.status < 200, "interim status \(head.status)")
                    case .head(let head, _):
                        out.heads.append(head.status)
                        check(head.status >= 200 && head.status <= 999, "final status \(head.status)")
                        for f in head.fields {
                            check(f.nameStart >= 0 && f.nameStart + f.nameLength <= head.bytes.count, "name out of the head")
                            check(f.valueStart >= 0 && f.valueStart + f.valueLength <= head.bytes.count, "value out of the head")
                        }
                        // An upstream's trust-prefixed fields never reach the client.
                        var stripped = head
                        let prefix = Array("x-assertgate-".utf8)
                        let setBits = RequestPipeline.removeTrustFields(&stripped, prefix: prefix)
                        stripped.forEachForwarded { name, _ in
                            check(!name.starts(with: prefix), "a trust-prefixed response field forwarded")
                        }
                        if let setBits { _ = SetDeviceBits(parsing: setBits) }
                        head.forEachForwarded { name, value in
                            check(!name.isEmpty && name.allSatisfy { ASCII.isTokenByte($0) && ASCII.lower($0) == $0 }, "forwarded name")
                            check(HopByHop.classify(name) == .other || HopByHop.classify(name) == .contentLength, "hop-by-hop forwarded")
                            check(!value.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }), "CR/LF/NUL in a value")
                        }
                    case .body(let slice): out.body += Array(buffer: slice)
                    case .end:
                        out.ends += 1
                        check(out.ends == out.heads.count, "an end without its head")
                        // As the connection handler does: bytes after a response are refused.
                        if buffer.readableBytes > 0 { throw UpstreamResponseError.unexpectedBytes }
                    }
                }
            }
            if parser.connectionClosed() { out.ends += 1 }
        } catch {
            out.failed = true
        }
        check(out.body.count <= payload.count, "more body than input")
        return out
    }
    let whole = feed(chunk: max(1, payload.count))
    let pieces = feed(chunk: Int(flags & 0x0F) + 1)
    check(whole == pieces, "read size changed the outcome: \(whole) vs \(pieces)")
}

/// Route paths: every reading is an absolute path, and the widest one is plain.
func fuzzRoutingPath(_ bytes: [UInt8]) {
    let path = String(decoding: bytes, as: UTF8.self)
    // An absolute-form target splits into an authority and an origin-form path.
    if let absolute = AbsoluteTarget(path) {
        check(absolute.originForm.first == "/", "absolute-form target gave a relative path")
        check(!absolute.authority.isEmpty && !absolute.authority.contains("/"), "bad authority \(absolute.authority)")
        check(absolute.originForm.utf8.count <= path.utf8.count, "origin form longer than its target")
    }
    for reading in RoutingPath.readings(path[...]) {
        check(reading.first == UInt8(ascii: "/"), "a reading that is not absolute")
        check(reading.count <= path.utf8.count + 1, "a reading longer than its path")
    }
    // Route selection never picks a laxer route than the raw bytes match.
    func rank(_ r: RouteConfig?) -> Int {
        switch r?.mode {
        case nil: return -1
        case .passthrough?: return 0
        case .monitor?: return 1
        case .enforce?: return 2
        }
    }
    let raw = fuzzRoutes.route(method: "GET", path: path[...])
    switch fuzzRoutes.select(method: "GET", path: path[...]) {
    case .route(let r): check(rank(r) >= rank(raw), "a laxer route than the raw path's")
    case .noRoute: check(raw == nil, "no route though the raw path has one")
    case .ambiguous: break
    }
    guard let normalized = RoutingPath.normalized(path[...]) else { return }
    check(normalized.first == UInt8(ascii: "/"), "not absolute")
    check(!normalized.contains(UInt8(ascii: "\\")), "backslash left")
    let segments = normalized.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
    for (i, s) in segments.enumerated() {
        check(!s.isEmpty || i == segments.count - 1, "empty segment inside")
        check(!s.elementsEqual([UInt8(ascii: ".")]) && !s.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]), "dot segment left")
        check(!s.contains(UInt8(ascii: ";")), "parameter left")
    }
}

/// Routes with every mode, an exact and a slash-ended prefix, for fuzzRoutingPath.
let fuzzRoutes = GatewaySnapshot(
    config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [
        RouteConfig(match: RouteMatch(kind: .prefix("/api/pay"), methods: ["POST", "GET"]), upstream: "pay", mode: .enforce),
        RouteConfig(match: RouteMatch(kind: .exact("/api/account")), upstream: "account", mode: .enforce),
        RouteConfig(match: RouteMatch(kind: .prefix("/api/")), upstream: "api", mode: .monitor),
        RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "rest", mode: .passthrough),
    ]))

/// Apple's DeviceCheck answers (status from byte 0, the rest the body), and
/// an upstream's `Set-Device-Bits` value: never trap; a query's 200 is the
/// bits or unset whatever the body; a parsed instruction round-trips.
func fuzzDeviceCheck(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let body = Array(bytes.dropFirst())
    let statuses = [200, 200, 200, 400, 401, 403, 429, 500, 503, 302]
    let status = statuses[Int(first) % statuses.count]
    let call = DeviceCheckCall.allCases[Int(first / 16) % DeviceCheckCall.allCases.count]
    let result = DeviceCheckAnswer.result(of: call, status: status, body: body)
    if status == 200, call == .query {
        switch result {
        case .bits(let b): check(b.lastUpdate.map { $0.utf8.count == 7 } ?? true, "last update not YYYY-MM")
        case .unset: break
        default: check(false, "a query's 200 that is neither bits nor unset: \(result)")
        }
    }
    if let bits = SetDeviceBits(parsing: body[...]) {
        check(bits.bit0 != nil || bits.bit1 != nil, "an instruction without a bit")
        var parts: [String] = []
        if let b = bits.bit0 { parts.append("bit0=\(b ? 1 : 0)") }
        if let b = bits.bit1 { parts.append("bit1=\(b ? 1 : 0)") }
        check(SetDeviceBits(parsing: Array(parts.joined(separator: ", ").utf8)) == bits, "instruction does not round-trip")
    }
}

/// An HTTP/2 upstream's bytes (after a valid SETTINGS, so the fuzzer gets
/// past the preface) into a client session with two requests open: whatever
/// arrives, heads carry a status, trailers no pseudo-header, and no stream
/// the client never opened gets an event.
func fuzzUpstreamH2(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let settings = HTTP2Session.Settings(
        maxConcurrentStreams: 100, maxHeaderListBytes: 16 << 10, streamResetBurst: 1000, streamResetPerSecond: 1000)
    guard let session = try? HTTP2Session.client(settings, allocator: ByteBufferAllocator()) else { return }
    var get = UpstreamH2Head(method: "GET", target: "/a", scheme: "http", trailers: false)
    get.add(name: "Host", value: "h")
    get.finish()
    var post = UpstreamH2Head(method: "POST", target: "/b", scheme: "http", trailers: true)
    post.add(name: "Host", value: "h")
    post.finish()
    guard let a = try? session.submitRequest(get, body: nil), let b = try? session.submitRequest(post, body: nil) else { return }
    var events: [HTTP2Session.Event] = []
    var out: ByteBuffer?
    _ = try? session.drain(into: &out, events: &events)
    var input: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]  // SETTINGS, empty
    input += bytes.dropFirst()
    feedInPieces(session, input, piece: Int(first), events: &events)
    for e in events {
        switch e {
        case .response(let id, let head, _):
            check(id == a || id == b, "a head for stream \(id) never opened")
            check((200...599).contains(head.status), "a response head with status \(head.status)")
            for f in head.fields {
                check(f.nameStart + f.nameLength <= head.bytes.count && f.valueStart + f.valueLength <= head.bytes.count,
                    "a field outside the head's bytes")
            }
        case .interim(let id, let head):
            check(id == a || id == b, "an interim head for stream \(id) never opened")
            check(head.status > 100 && head.status < 200, "an interim head with status \(head.status)")
        case .head:
            check(false, "a request head on a client session")
        case .trailers(let id, let fields):
            check(id == a || id == b, "trailers for stream \(id) never opened")
            for (name, _) in fields { check(!name.hasPrefix(":"), "pseudo-header \(name) in trailers") }
        case .data(let id, _):
            check(id == a || id == b, "data for stream \(id) never opened")
        default:
            break
        }
    }
}

/// A client's bytes (after the preface and an empty SETTINGS) into the
/// front end's server session. Checks what the upstream head writer relies
/// on when it copies an HTTP/2 client's fields unchecked
/// (`ProxyRequest.fieldsChecked`): every field of a head has a non-empty,
/// lower-case token name and a value without CR, LF, NUL or another control
/// byte but tab; a head stays within the header-list limit; events name only
/// streams whose header block began or ended before them. Each head then
/// goes through the upstream head writer as a checked request, and no line
/// of what it writes is split.
func fuzzServerH2(_ bytes: [UInt8]) {
    guard let first = bytes.first, let snapshot = fuzzSnapshot, let route = snapshot.config.routes.last else { return }
    let limit = 4 << 10
    let settings = HTTP2Session.Settings(
        maxConcurrentStreams: 16, maxHeaderListBytes: limit, streamResetBurst: 1000, streamResetPerSecond: 1000)
    guard let session = try? HTTP2Session.server(settings, allocator: ByteBufferAllocator()) else { return }
    var input = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
    input += bytes.dropFirst()
    var events: [HTTP2Session.Event] = []
    feedInPieces(session, input, piece: Int(first), events: &events)
    var begun = Set<Int32>()
    for e in events {
        switch e {
        case .headerBlockStarted(let id), .headerBlockEnded(let id):
            // A block's start is reported only when it outlives the bytes fed
            // (`HTTP2Session.Event`); its end always, before its head.
            check(id > 0 && id % 2 == 1, "a header block on stream \(id), not a client's")
            begun.insert(id)
        case .head(let id, let head, _):
            check(begun.contains(id), "a head for stream \(id) that never began")
            check(head.method?.isEmpty == false, "a head without :method")
            var size = 0
            for (name, value) in head.fields {
                size += name.utf8.count + value.utf8.count + 32
                check(!name.isEmpty && isToken(name) && name == name.lowercased(), "field name \(name.debugDescription)")
                check(UpstreamHeadWriter.isFieldValue(value), "field value \(value.debugDescription)")
            }
            check(size <= limit, "a head of \(size) bytes past the limit")
            var proxied = ProxyRequest(
                method: head.method ?? "GET", target: head.path ?? "/", authority: head.authority, scheme: "http",
                headers: head.fields, requestId: "fuzz-request", clientAddress: "127.0.0.1", snapshot: snapshot)
            proxied.fieldsChecked = true
            let request = HeaderRewriter.upstreamRequestHead(
                for: proxied, route: route, extra: [], bodyFraming: .none, allocator: ByteBufferAllocator(),
                forwarding: ForwardingCache())
            if let request {
                let text = Array(request.bytes.readableBytesView)
                check(text.suffix(4) == Array("\r\n\r\n".utf8), "a head that does not end in an empty line")
                // Every CR is followed by LF and every LF preceded by CR; no NUL.
                for (i, b) in text.enumerated() {
                    check(b != 0, "NUL in the upstream head")
                    if b == 13 { check(i + 1 < text.count && text[i + 1] == 10, "a bare CR in the upstream head") }
                    if b == 10 { check(i > 0 && text[i - 1] == 13, "a bare LF in the upstream head") }
                }
            }
        case .trailers(let id, let fields):
            check(begun.contains(id), "trailers for stream \(id) that never began")
            for (name, _) in fields { check(!name.hasPrefix(":"), "pseudo-header \(name) in trailers") }
        case .data(let id, _):
            check(begun.contains(id), "data for stream \(id) that never began")
        default:
            break
        }
    }
}

/// Feeds `input` in pieces of a size the input picks (state must carry
/// across reads), draining what the session answers after each.
func feedInPieces(_ session: HTTP2Session, _ input: [UInt8], piece: Int, events: inout [HTTP2Session.Event]) {
    let piece = max(1, piece)
    var out: ByteBuffer?
    var offset = 0
    while offset < input.count {
        let end = min(input.count, offset + piece)
        do { try session.feed(ByteBuffer(bytes: input[offset..<end]), into: &events) } catch { break }
        offset = end
        out = nil
        _ = try? session.drain(into: &out, events: &events)
    }
}
