/// The readings upstream servers might give a request path, for route
/// selection only (the request is still signed and forwarded exactly as
/// received, protocol.md §4).
///
/// Upstream servers disagree on what `/api/../pay`, `/api//pay`, `/%61pi/pay`,
/// `/api%2Fpay`, `/api;x=1/pay`, `/api\pay` or `/api/pay/` mean: nginx
/// decodes escapes, resolves dot segments and merges slashes; Tomcat drops
/// `;` parameters before it decodes; Apache with `AllowEncodedSlashes
/// NoDecode` keeps `%2F` inside a segment; a few servers decode twice; some
/// treat `\` as `/`; Express and Spring (≤ 5.3) ignore a trailing slash. If
/// the gateway matched only the raw bytes, such a path could select a
/// passthrough route while the upstream serves it from an enforced one. So
/// every reading below must select the route the raw path selects, or the
/// request is refused.
enum RoutingPath {
    /// The other readings of `path`; empty when it is plain (nothing in it
    /// could be read differently), which is the case for nearly every request.
    /// Trailing slashes and letter case are the caller's (`GatewaySnapshot.select`).
    static func readings(_ path: Substring) -> [[UInt8]] {
        guard path.utf8.first == UInt8(ascii: "/"), needsNormalizing(path.utf8) else { return [] }
        let bytes = Array(path.utf8.prefix { $0 != UInt8(ascii: "#") })
        let decoded = decode(bytes, keepSlashEscapes: false)
        let twice = decode(decoded, keepSlashEscapes: false)
        var out: [[UInt8]] = [
            // nginx: decode, merge slashes, resolve dot segments.
            removeDotSegments(decoded, dropParameters: true, mergeSlashes: true),
            // RFC 3986 / WHATWG URL / Envoy: dot segments resolved, `//` kept (so `..` can eat an empty segment).
            removeDotSegments(decoded, dropParameters: false, mergeSlashes: false),
            // Tomcat: `;` parameters off each raw segment first, then decode.
            removeDotSegments(decode(dropParameters(bytes), keepSlashEscapes: false), dropParameters: false, mergeSlashes: true),
            // Encoded slashes kept inside their segment (Apache NoDecode, Tomcat passthrough).
            removeDotSegments(decode(bytes, keepSlashEscapes: true), dropParameters: true, mergeSlashes: true),
            // Decoded twice.
            removeDotSegments(twice, dropParameters: true, mergeSlashes: true),
        ]
        // A server that decodes and parses again ends the path at a decoded `?` or `#`.
        for d in [decoded, twice] {
            if let cut = d.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
                out.append(removeDotSegments(Array(d[..<cut]), dropParameters: true, mergeSlashes: true))
            }
        }
        return out
    }

    /// The widest single reading (every escape decoded, `;` parameters and dot
    /// segments resolved), or nil when `path` is plain; for tests and the fuzzer.
    static func normalized(_ path: Substring) -> [UInt8]? {
        guard path.utf8.first == UInt8(ascii: "/"), needsNormalizing(path.utf8) else { return nil }
        let bytes = Array(path.utf8.prefix { $0 != UInt8(ascii: "#") })
        return removeDotSegments(decode(bytes, keepSlashEscapes: false), dropParameters: true, mergeSlashes: true)
    }

    /// Every valid `%XX` decoded (but `%2F`/`%5C` when `keepSlashEscapes`); `\` reads as `/`.
    private static func decode(_ bytes: [UInt8], keepSlashEscapes: Bool) -> [UInt8] {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            var b = bytes[i]
            if b == UInt8(ascii: "%"), i + 2 < bytes.count, let h = ASCII.hexDigit(bytes[i + 1]), let l = ASCII.hexDigit(bytes[i + 2]) {
                let v = UInt8(h << 4 | l)
                if keepSlashEscapes, v == UInt8(ascii: "/") || v == UInt8(ascii: "\\") {
                    decoded.append(contentsOf: bytes[i..<i + 3])
                    i += 3
                    continue
                }
                b = v
                i += 3
            } else {
                i += 1
            }
            decoded.append(b == UInt8(ascii: "\\") ? UInt8(ascii: "/") : b)
        }
        return decoded
    }

    /// Each segment without its `;` parameters.
    private static func dropParameters(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var inParameter = false
        for b in bytes {
            if b == UInt8(ascii: "/") {
                inParameter = false
            } else if b == UInt8(ascii: ";") {
                inParameter = true
            }
            if !inParameter { out.append(b) }
        }
        return out
    }

    /// Splits on `/`, drops `.` segments (and `;` parameters, and empty
    /// segments when merging slashes, when asked), resolves `..`.
    private static func removeDotSegments(_ bytes: [UInt8], dropParameters: Bool, mergeSlashes: Bool) -> [UInt8] {
        var segments: [ArraySlice<UInt8>] = []
        var trailingSlash = false
        let parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
        for (n, raw) in parts.enumerated() {
            let cut = dropParameters ? raw.firstIndex(of: UInt8(ascii: ";")) : nil
            let segment = cut.map { raw[raw.startIndex..<$0] } ?? raw
            let last = n == parts.count - 1
            switch segment.count {
            case 0 where mergeSlashes || last:
                trailingSlash = true
            case 1 where segment.first == UInt8(ascii: "."):
                trailingSlash = true
            case 2 where segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]):
                if !segments.isEmpty { segments.removeLast() }
                trailingSlash = true
            default:
                segments.append(segment)
                trailingSlash = false
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for s in segments {
            out.append(UInt8(ascii: "/"))
            out.append(contentsOf: s)
        }
        if trailingSlash || out.isEmpty { out.append(UInt8(ascii: "/")) }
        return out
    }

    /// Anything an upstream could read differently: an escape, a `;`, a `\`, a
    /// `#`, an empty segment, or a `.`/`..` segment. (A target that does not
    /// start with `/`, such as `*`, is matched as it is.)
    private static func needsNormalizing(_ utf8: Substring.UTF8View) -> Bool {
        var previous: UInt8 = 0
        var segmentStart = true
        var dots = 0
        for b in utf8 {
            switch b {
            case UInt8(ascii: "%"), UInt8(ascii: ";"), UInt8(ascii: "\\"), UInt8(ascii: "#"):
                return true
            case UInt8(ascii: "/"):
                if previous == UInt8(ascii: "/") { return true }
                if segmentStart, dots > 0 { return true }
                segmentStart = true
                dots = 0
            case UInt8(ascii: "."):
                if segmentStart { dots += 1 }
                if dots > 2 { segmentStart = false }
            default:
                segmentStart = false
                dots = 0
            }
            previous = b
        }
        return segmentStart && dots > 0
    }
}
