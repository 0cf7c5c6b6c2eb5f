import Verifier

/// Per-worker cache of attested keys' immutable part with the parsed
/// `EVP_PKEY`, so the hot path neither asks Redis for the key nor parses it
/// (app-attest.md §3). Loop-confined; bounded with a cheap second-chance
/// eviction. Revocation is not cached: it is checked inside the atomic commit.
public final class KeyCache {
    public struct Entry {
        public let stored: StoredKey
        public let publicKey: P256PublicKey
        /// Reuses one verify context per cached key; safe because the cache
        /// (and so the entry) is confined to its worker's loop.
        public let verifier: P256Verifier

        public init(stored: StoredKey, publicKey: P256PublicKey) {
            self.stored = stored
            self.publicKey = publicKey
            self.verifier = P256Verifier(publicKey: publicKey)
        }
    }

    private var entries: [[UInt8]: (entry: Entry, referenced: Bool)] = [:]
    private var order: [[UInt8]] = []
    private var hand = 0
    public let capacity: Int

    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    public var count: Int { entries.count }

    public func get(_ keyId: [UInt8]) -> Entry? {
        guard let e = entries[keyId] else { return nil }
        if !e.referenced { entries[keyId] = (e.entry, true) }
        return e.entry
    }

    public func put(_ keyId: [UInt8], _ entry: Entry) {
        if entries[keyId] != nil {
            entries[keyId] = (entry, true)
            return
        }
        if entries.count >= capacity { evictOne() }
        entries[keyId] = (entry, false)
        order.append(keyId)
    }

    public func remove(_ keyId: [UInt8]) {
        entries[keyId] = nil
    }

    private func evictOne() {
        // Clock sweep over insertion order; stale slots (removed keys) are skipped.
        while !order.isEmpty {
            if hand >= order.count { hand = 0 }
            let k = order[hand]
            guard let e = entries[k] else {
                order.swapAt(hand, order.count - 1)
                order.removeLast()
                continue
            }
            if e.referenced {
                entries[k] = (e.entry, false)
                hand += 1
            } else {
                entries[k] = nil
                order.swapAt(hand, order.count - 1)
                order.removeLast()
                return
            }
        }
    }
}
