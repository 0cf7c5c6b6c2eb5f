/// The byte classes of RFC 3986 that a request's target and authority are
/// held to, in one place: the intake refuses what fails them (400), and the
/// upstream head writers check the target again before it reaches a wire.
///
/// Each class is a 128-bit set as two words (bit `b` set: byte `b` is in it),
/// so a byte costs a shift and a mask, on every request; `URISyntaxTests`
/// checks each set against its definition spelled out.
enum URISyntax {
    /// A target in origin form (or `*`): unreserved, percent, sub-delims,
    /// `:`, `@`, `/`, `?` (RFC 9112 §3.2.1), and `[`/`]`, which an
    /// absolute-form target's IPv6 literal leaves in some clients' paths. No
    /// `#`: a fragment is never part of a request target, and an upstream
    /// that cuts at it would route another path than the gateway did.
    static func isTarget(_ s: String) -> Bool {
        if let r = s.utf8.withContiguousStorageIfAvailable({ all($0, in: Class.target) }) { return r }
        return Array(s.utf8).withUnsafeBufferPointer { all($0, in: Class.target) }
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
                guard has(Class.ipLiteral, b[i]) else { return false }
                i += 1
            }
            guard i < b.count, i > 1 else { return false }
            i += 1
        } else {
            while i < b.count, b[i] != UInt8(ascii: ":") {
                guard has(Class.regName, b[i]) else { return false }
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

    /// The sets, bytes 0–63 and 64–127 (none above).
    enum Class {
        /// Unreserved, sub-delims, `%`, `:`, `@`, `/`, `?`, `[`, `]`.
        static var target: (UInt64, UInt64) { (0xafff_fff2_0000_0000, 0x47ff_fffe_afff_ffff) }
        /// Unreserved, sub-delims, `%`.
        static var regName: (UInt64, UInt64) { (0x2bff_7ff2_0000_0000, 0x47ff_fffe_87ff_fffe) }
        /// Unreserved, sub-delims, `:`.
        static var ipLiteral: (UInt64, UInt64) { (0x2fff_7fd2_0000_0000, 0x47ff_fffe_87ff_fffe) }
    }

    @inline(__always)
    static func has(_ set: (UInt64, UInt64), _ b: UInt8) -> Bool {
        b < 64 ? (set.0 >> b) & 1 != 0 : b < 128 ? (set.1 >> (b &- 64)) & 1 != 0 : false
    }

    @inline(__always)
    private static func all(_ bytes: UnsafeBufferPointer<UInt8>, in set: (UInt64, UInt64)) -> Bool {
        for b in bytes where !has(set, b) { return false }
        return true
    }
}
