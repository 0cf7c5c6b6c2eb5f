/// The DeviceCheck bit-update queue of `MemoryStore`: the same semantics as
/// the Redis one (docs/redis.md), kept under the store's lock. Times are
/// unix milliseconds passed in by the caller.
struct MemoryBitUpdateQueue {
    private struct Item {
        var update: DeviceBitUpdate
        var due: Int64
    }

    private var items: [String: Item] = [:]

    var depth: Int { items.count }

    mutating func enqueue(_ update: DeviceBitUpdate, maxQueued: Int) -> Bool {
        guard items[update.id] == nil else { return true }
        guard items.count < maxQueued else { return false }
        var stored = update
        stored.attempts = 0
        items[update.id] = Item(update: stored, due: update.enqueuedAt)
        return true
    }

    mutating func claim(now: Int64, lease: Int64, limit: Int) -> [DeviceBitUpdate] {
        // Ties broken by id, as a Redis sorted set orders equal scores.
        let due = items.values.filter { $0.due <= now }
            .sorted { ($0.due, $0.update.id) < ($1.due, $1.update.id) }
            .prefix(max(0, limit))
        return due.map { item in
            var claimed = item
            claimed.due = now + lease
            claimed.update.attempts += 1
            items[item.update.id] = claimed
            return claimed.update
        }
    }

    mutating func ack(id: String) {
        items[id] = nil
    }

    mutating func retry(_ update: DeviceBitUpdate, at: Int64) -> Bool {
        guard var item = items[update.id], item.update.attempts == update.attempts else { return false }
        item.due = at
        items[update.id] = item
        return true
    }
}
