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
        let n = name.utf8
        guard n.count == literal.utf8CodeUnitCount else { return false }
        return literal.withUTF8Buffer { lit in
            var i = 0
            for b in n {
                if ASCII.lower(b) != lit[i] { return false }
                i += 1
            }
            return true
        }
    }
}
