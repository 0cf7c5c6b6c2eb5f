/// The widest reading an upstream might give a request path, for route
/// selection only (the request is still signed and forwarded exactly as
/// received, protocol.md §4).
///
/// Upstream servers disagree on what `/api/../pay`, `/api//pay`, `/%61pi/pay`,
/// `/api%2Fpay`, `/api;x=1/pay` or `/api\pay` mean: nginx decodes escapes,
/// resolves dot segments and merges slashes; Java containers drop `;`
/// parameters; some servers treat `\` as `/`. If the gateway matched only the
/// raw bytes, such a path could select a passthrough route while the upstream
/// serves it from an enforced one. So the gateway also matches this reading,
/// and a path whose two readings select different routes is refused.
enum RoutingPath {
    /// Paths beyond this are not normalised byte by byte (the header limits
    /// bound them anyway); they are refused as ambiguous when not plain.
    static let maxLength = 8192

    /// The normalised path, or nil when `path` is already plain (nothing in it
    /// could be read differently), which is the case for nearly every request.
    static func normalized(_ path: Substring) -> [UInt8]? {
        guard path.utf8.first == UInt8(ascii: "/"), needsNormalizing(path.utf8) else { return nil }
        let bytes = Array(path.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var i = 0
        // Percent-decode every valid escape; `\` reads as `/`; a fragment ends the path.
        while i < bytes.count {
            var b = bytes[i]
            if b == UInt8(ascii: "#") { break }
            if b == UInt8(ascii: "%"), i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) {
                b = h << 4 | l
                i += 3
            } else {
                i += 1
            }
            decoded.append(b == UInt8(ascii: "\\") ? UInt8(ascii: "/") : b)
        }
        return removeDotSegments(decoded)
    }

    /// Splits on `/`, drops `;` parameters, empty and `.` segments, resolves `..`.
    private static func removeDotSegments(_ bytes: [UInt8]) -> [UInt8] {
        var segments: [ArraySlice<UInt8>] = []
        var trailingSlash = false
        for raw in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst() {
            let segment = raw.firstIndex(of: UInt8(ascii: ";")).map { raw[raw.startIndex..<$0] } ?? raw
            switch segment.count {
            case 0:
                trailingSlash = true
                continue
            case 1 where segment.first == UInt8(ascii: "."):
                trailingSlash = true
                continue
            case 2 where segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]):
                if !segments.isEmpty { segments.removeLast() }
                trailingSlash = true
                continue
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

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
