import Synchronization

/// A monotonically increasing count (Prometheus `counter`).
public final class Counter: Sendable {
    private let storage = ShardedInt()

    init() {}

    @inline(__always)
    public func inc(_ by: Int = 1) { storage.add(by) }

    public var value: Int { storage.sum }
}

/// A value that goes up and down (Prometheus `gauge`), e.g. open connections.
public final class Gauge: Sendable {
    private let storage = ShardedInt()
    /// Counts owned by one event loop each, added in at every read.
    private let attached = Mutex<[LoopCounter]>([])

    init() {}

    /// `counter` is read into this gauge from now on (its owner keeps it).
    func attach(_ counter: LoopCounter) {
        attached.withLock { $0.append(counter) }
    }

    @inline(__always)
    public func inc(_ by: Int = 1) { storage.add(by) }

    @inline(__always)
    public func dec(_ by: Int = 1) { storage.add(-by) }

    public var value: Int { storage.sum &+ attached.withLock { $0.reduce(0) { $0 &+ $1.value } } }
}

/// A count written by one thread (an event loop) and read by any: a plain
/// load and store, no read-modify-write, where a sharded gauge pays a thread
/// lookup and a locked add. For what changes with every request.
final class LoopCounter: Sendable {
    private let storage = Atomic<Int>(0)

    /// On the owning thread only.
    @inline(__always)
    func add(_ delta: Int) {
        storage.store(storage.load(ordering: .relaxed) &+ delta, ordering: .relaxed)
    }

    var value: Int { storage.load(ordering: .relaxed) }
}

/// Observations in fixed buckets (Prometheus `histogram`). Each shard keeps
/// non-cumulative bucket counts; the exposition accumulates them.
public final class Histogram: Sendable {
    public let upperBounds: [Double]
    private let shards: [Shard]

    final class Shard: Sendable {
        let buckets: [AtomicSlot]
        let count = AtomicSlot()
        let sumBits = Atomic<UInt64>(0)
        init(bucketCount: Int) {
            buckets = (0..<bucketCount).map { _ in AtomicSlot() }
        }
    }

    init(upperBounds: [Double]) {
        self.upperBounds = upperBounds
        shards = (0..<ShardIndex.count).map { _ in Shard(bucketCount: upperBounds.count + 1) }
    }

    public func observe(_ value: Double) {
        let shard = shards[ShardIndex.current()]
        var index = upperBounds.count
        for (i, bound) in upperBounds.enumerated() where value <= bound {
            index = i
            break
        }
        shard.buckets[index].value.wrappingAdd(1, ordering: .relaxed)
        shard.count.value.wrappingAdd(1, ordering: .relaxed)
        // A shard is nearly always touched by one thread, so this CAS succeeds first time.
        var old = shard.sumBits.load(ordering: .relaxed)
        while true {
            let new = (Double(bitPattern: old) + value).bitPattern
            let (exchanged, original) = shard.sumBits.compareExchange(
                expected: old, desired: new, ordering: .relaxed)
            if exchanged { break }
            old = original
        }
    }

    /// Records a duration given in nanoseconds (e.g. a difference of `NIODeadline.now()` values) as seconds.
    public func observe(elapsedNanoseconds: Int64) {
        observe(Double(elapsedNanoseconds) / 1e9)
    }

    struct Snapshot {
        var cumulative: [Int]
        var count: Int
        var sum: Double
    }

    func snapshot() -> Snapshot {
        var perBucket = [Int](repeating: 0, count: upperBounds.count + 1)
        var count = 0
        var sum = 0.0
        for shard in shards {
            for (i, slot) in shard.buckets.enumerated() { perBucket[i] &+= slot.value.load(ordering: .relaxed) }
            count &+= shard.count.value.load(ordering: .relaxed)
            sum += Double(bitPattern: shard.sumBits.load(ordering: .relaxed))
        }
        var running = 0
        let cumulative = perBucket.map { running &+= $0; return running }
        return Snapshot(cumulative: cumulative, count: count, sum: sum)
    }

    public var count: Int { snapshot().count }
    public var sum: Double { snapshot().sum }

    /// Prometheus' default buckets, suited to request latencies in seconds.
    public static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
}
