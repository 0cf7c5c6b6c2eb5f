/// The byte classes of RFC 3986 that a request's target and authority are
/// held to, in one place: the intake refuses what fails them (400), and the
/// upstream head writers check the target again before it reaches a wire.
enum URISyntax {
    /// A target in origin form (or `*`): unreserved, percent, sub-delims,
    /// `:`, `@`, `/`, `?` (RFC 9112 §3.2.1), and `[`/`]`, which an
    /// absolute-form target's IPv6 literal leaves in some clients' paths. No
    /// `#`: a fragment is never part of a request target, and an upstream
    /// that cuts at it would route another path than the gateway did.
    static func isTarget(_ s: String) -> Bool {
        allBytes(s) { b in
            isUnreserved(b) || isSubDelim(b) || b == UInt8(ascii: "%") || b == UInt8(ascii: ":")
                || b == UInt8(ascii: "@") || b == UInt8(ascii: "/") || b == UInt8(ascii: "?")
                || b == UInt8(ascii: "[") || b == UInt8(ascii: "]")
        }
    }

    /// `uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2): a non-empty
    /// reg-name or IPv4 address (unreserved, sub-delims, `%`) or a bracketed
    /// IP literal, then digits only after one `:`. No userinfo (`@`, RFC
    /// 9110 §4.2.4), no `/`, `?`, `#` or space: an upstream that builds URLs
    /// from `Host` must not be handed a path or another site in it.
    static func isAuthority(_ s: String) -> Bool {
        if let r = s.utf8.withContiguousStorageIfAvailable({ isAuthority($0) }) { return r }
        return Array(s.utf8).withUnsafeBufferPointer { isAuthority($0) }
    }

    static func isAuthority(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        if b.first == UInt8(ascii: "[") {
            // IP-literal: IPv6 (hex, `:`, `.`) or IPvFuture (`v`, unreserved, sub-delims, `:`).
            i = 1
            while i < b.count, b[i] != UInt8(ascii: "]") {
                guard isUnreserved(b[i]) || isSubDelim(b[i]) || b[i] == UInt8(ascii: ":") else { return false }
                i += 1
            }
            guard i < b.count, i > 1 else { return false }
            i += 1
        } else {
            while i < b.count, b[i] != UInt8(ascii: ":") {
                guard isUnreserved(b[i]) || isSubDelim(b[i]) || b[i] == UInt8(ascii: "%") else { return false }
                i += 1
            }
            guard i > 0 else { return false }
        }
        if i == b.count { return true }
        guard b[i] == UInt8(ascii: ":") else { return false }
        i += 1
        while i < b.count {
            guard b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") else { return false }
            i += 1
        }
        return true
    }

    @inline(__always)
    private static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    @inline(__always)
    private static func isSubDelim(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            return true
        default:
            return false
        }
    }

    @inline(__always)
    private static func allBytes(_ s: String, _ ok: (UInt8) -> Bool) -> Bool {
        if let r = s.utf8.withContiguousStorageIfAvailable({ bytes in bytes.allSatisfy(ok) }) { return r }
        return s.utf8.allSatisfy(ok)
    }
}
