/// Byte-level ASCII helpers for header names (no String case folding on the hot path).
enum ASCII {
    @inline(__always) static func lower(_ b: UInt8) -> UInt8 {
        (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
    }

    /// Case-insensitive: does `name` start with the lower-cased `prefix`?
    static func hasPrefixCI(_ name: String, lowerPrefix: [UInt8]) -> Bool {
        var it = name.utf8.makeIterator()
        for p in lowerPrefix {
            guard let b = it.next(), lower(b) == p else { return false }
        }
        return true
    }

    /// Case-insensitive equality against a lower-cased literal.
    static func equalsCI(_ name: String, lower: [UInt8]) -> Bool {
        name.utf8.count == lower.count && hasPrefixCI(name, lowerPrefix: lower)
    }

    static func equalsCI(_ name: String, _ literal: StaticString) -> Bool {
        equalsLower(name.utf8, literal)
    }

    /// Two strings equal but for ASCII case (hosts: RFC 3986 §3.2.2).
    static func sameIgnoringCase(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { lower($0) == lower($1) }
    }

    // MARK: byte slices (the upstream response parser)

    /// RFC 9110 tchar.
    @inline(__always) static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"),
            UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"),
            UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    @inline(__always) static func digit(_ b: UInt8) -> Int? {
        b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") ? Int(b - UInt8(ascii: "0")) : nil
    }

    @inline(__always) static func hexDigit(_ b: UInt8) -> Int? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(b - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(b - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(b - UInt8(ascii: "A")) + 10
        default: return nil
        }
    }

    /// Token bytes (RFC 9110 §5.6.2) lower-cased, 0 for every other byte:
    /// one load a byte where the token switch takes several branches.
    static let tokenLowerTable: [UInt8] = (0..<256).map { b in
        isTokenByte(UInt8(b)) ? lower(UInt8(b)) : 0
    }

    /// Every byte of `s` is a token byte (`s` may be empty).
    static func allTokenBytes(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        tokenLowerTable.withUnsafeBufferPointer { t in
            for b in s where t[Int(b)] == 0 { return false }
            return true
        }
    }

    /// The index of the first byte of `p[start...]` that cannot be in a field
    /// value (a control byte other than HTAB, or DEL: CR and LF included),
    /// `p.count` if none. Eight bytes per step while none is below 0x20 or
    /// DEL (exact word tests, as in "Bit Twiddling Hacks": a borrow only
    /// starts at a byte that is below the bound, so a word with no such byte
    /// is never flagged); in a flagged word the lowest flagged byte is the
    /// stop or a tab, found from the bit's position. Not inlined: on its own its loop keeps the index in a register.
    @inline(never)
    static func fieldValueRun(_ p: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = p.baseAddress else { return start }
        let n = p.count
        var i = start
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let raw = UnsafeRawPointer(base)
        while i &+ 8 <= n {
            // Byte k of the word in bits 8k..8k+7, whatever the host's order.
            let w = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let below = (w &- ones &* 0x20) & ~w & highs
            let d = w ^ (ones &* 0x7F)
            let del = (d &- ones) & ~d & highs
            let flagged = below | del
            if flagged == 0 {
                i &+= 8
                continue
            }
            // The lowest flagged byte is exact (only bytes above one that is
            // below the bound can be flagged falsely): the stop, or a tab to step over.
            let at = i &+ (flagged.trailingZeroBitCount &>> 3)
            if base[at] != 0x09 { return at }
            i = at &+ 1
        }
        while i < n {
            let b = base[i]
            if b < 0x20 || b == 0x7F, b != 0x09 { return i }
            i &+= 1
        }
        return i
    }

    /// Without leading and trailing spaces and tabs (any byte collection:
    /// a string's UTF-8 view is trimmed in place, without a copy).
    static func trimmed<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
        var s = bytes[...]
        while let f = s.first, f == UInt8(ascii: " ") || f == 0x09 { s = s.dropFirst() }
        while let l = s.last, l == UInt8(ascii: " ") || l == 0x09 { s = s.dropLast() }
        return s
    }

    /// Case-insensitive equality with a lower-case literal.
    /// A `String`'s bytes are read in place when they are contiguous (native
    /// and small strings): a pointer loop, not the UTF-8 view's iterator,
    /// which costs about as much again per byte on every header name checked.
    static func equalsLower<Bytes: Collection<UInt8>>(_ s: Bytes, _ lower: StaticString) -> Bool {
        guard s.count == lower.utf8CodeUnitCount else { return false }
        return lower.withUTF8Buffer { lit in
            if let equal = s.withContiguousStorageIfAvailable({ equalsLower($0, lit) }) { return equal }
            var i = 0
            for b in s {
                if ASCII.lower(b) != lit[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// `s` and `lower` have the same count.
    @inline(__always)
    private static func equalsLower(_ s: UnsafeBufferPointer<UInt8>, _ lower: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        while i < s.count {
            if ASCII.lower(s[i]) != lower[i] { return false }
            i &+= 1
        }
        return true
    }

    /// Case-insensitive equality of `s` with `lower`, already lower-case.
    static func equalsLowerBytes(_ s: ArraySlice<UInt8>, _ lower: ArraySlice<UInt8>) -> Bool {
        s.count == lower.count && zip(s, lower).allSatisfy { ASCII.lower($0) == $1 }
    }

    /// A `Content-Length` value: 1 to 18 digits (so it fits an Int), nothing
    /// else. A list, even of equal values, is refused, as nginx does: passing
    /// it on would break HTTP/2 clients and RFC 9110 §8.6 forbids forwarding it.
    static func contentLength<Bytes: Collection<UInt8>>(_ value: Bytes) -> Int? {
        guard !value.isEmpty, value.count <= 18 else { return nil }
        var n = 0
        for b in value {
            guard let d = digit(b) else { return nil }
            n = n * 10 + d
        }
        return n
    }
}
