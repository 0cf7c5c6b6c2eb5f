/// Per-worker UUIDv4 generator: seeded once from the system RNG, then a
/// xorshift-style PRNG, so a request id costs no syscall. Ids are unique, not secret.
struct RequestIdGenerator {
    private var s0: UInt64
    private var s1: UInt64

    init() {
        var rng = SystemRandomNumberGenerator()
        s0 = rng.next() | 1
        s1 = rng.next() | 2
    }

    private mutating func next() -> UInt64 {
        // xorshift128+
        var x = s0
        let y = s1
        s0 = y
        x ^= x << 23
        s1 = x ^ y ^ (x >> 17) ^ (y >> 26)
        return s1 &+ y
    }

    mutating func make() -> String {
        var hi = next()
        var lo = next()
        hi = (hi & ~0xF000) | 0x4000  // version 4
        lo = (lo & ~(0xC << 60)) | (0x8 << 60)  // variant 10xx
        return String(unsafeUninitializedCapacity: 36) { buf in
            let hex: StaticString = "0123456789abcdef"
            hex.withUTF8Buffer { h in
                var o = 0
                func put(_ v: UInt64, _ nibbles: Int, _ o: inout Int) {
                    var i = nibbles - 1
                    while i >= 0 {
                        buf[o] = h[Int((v >> (UInt64(i) * 4)) & 0xF)]
                        o += 1
                        i -= 1
                    }
                }
                put(hi >> 32, 8, &o); buf[o] = UInt8(ascii: "-"); o += 1
                put(hi >> 16, 4, &o); buf[o] = UInt8(ascii: "-"); o += 1
                put(hi, 4, &o); buf[o] = UInt8(ascii: "-"); o += 1
                put(lo >> 48, 4, &o); buf[o] = UInt8(ascii: "-"); o += 1
                put(lo, 12, &o)
            }
            return 36
        }
    }
}
