import Synchronization

/// One worker's response bytes queued for its HTTP/2 clients
/// (`limits.maxQueuedResponseBytes`). Each stream holds up to
/// `HTTP2Stream.highWater` before its upstream is paused, so streams whose
/// clients take nothing can add up, over many connections, to more memory
/// than the machine has; past the budget the stall watch treats a stream
/// that took nothing for one of its ticks as stalled (and resets it) instead
/// of waiting `streamWriteTimeout`.
///
/// Written by the worker's loop only; read by `/metrics` from anywhere:
/// plain loads and stores, as `LoopCounter`.
final class ResponseQueueBudget: Sendable {
    let queued = LoopCounter()
    private let limitStorage: Atomic<Int>

    init(limit: Int) {
        limitStorage = Atomic(limit)
    }

    var limit: Int {
        get { limitStorage.load(ordering: .relaxed) }
        set { limitStorage.store(newValue, ordering: .relaxed) }
    }

    @inline(__always)
    func add(_ delta: Int) { queued.add(delta) }

    var isOver: Bool { queued.value > limit }
}
