import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One atomic slot. Boxed so a shard array can hold non-copyable atomics, and
/// each slot is its own allocation so shards of different threads rarely share
/// a cache line.
final class AtomicSlot: Sendable {
    let value = Atomic<Int>(0)
    // Padding keeps neighbouring slots (allocated back to back) on separate lines.
    private let padding: (Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0)
}

/// Picks the shard of the calling thread: event loop threads (one per core)
/// land on different shards, so hot-path increments are uncontended relaxed
/// atomic adds; a scrape sums the shards.
enum ShardIndex {
    static let count: Int = {
        #if canImport(Glibc) || canImport(Musl)
        let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        #else
        let cores = max(1, Int(sysconf(_SC_NPROCESSORS_ONLN)))
        #endif
        // Power of two, at least twice the cores to keep hash collisions rare, capped.
        var n = 1
        while n < cores * 2 && n < 64 { n <<= 1 }
        return n
    }()

    static let shift: Int = UInt64.bitWidth - count.trailingZeroBitCount

    @inline(__always)
    static func current() -> Int {
        #if canImport(Darwin)
        let id = UInt64(UInt(bitPattern: pthread_self()))
        #else
        let id = UInt64(pthread_self())
        #endif
        if count == 1 { return 0 }
        return Int(truncatingIfNeeded: (id &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
    }
}

/// A sum over per-thread shards.
final class ShardedInt: Sendable {
    private let slots: [AtomicSlot]

    init() {
        slots = (0..<ShardIndex.count).map { _ in AtomicSlot() }
    }

    @inline(__always)
    func add(_ delta: Int) {
        slots[ShardIndex.current()].value.wrappingAdd(delta, ordering: .relaxed)
    }

    var sum: Int {
        slots.reduce(0) { $0 &+ $1.value.load(ordering: .relaxed) }
    }
}
