/// `-MOVED <slot> <host:port>` (the slot lives elsewhere now: update the map)
/// and `-ASK <slot> <host:port>` (the slot is being migrated and this key is
/// already there: ask that node once, after `ASKING`).
enum RedisRedirect: Equatable {
    case moved(slot: UInt16, to: RedisNodeAddress)
    case ask(slot: UInt16, to: RedisNodeAddress)

    init?(errorMessage message: String, defaultHost: String) {
        let parts = message.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, let slot = UInt16(parts[1]), Int(slot) < RedisHashSlot.count,
            let to = RedisNodeAddress.parseAnnounced(parts[2], defaultHost: defaultHost)
        else { return nil }
        switch parts[0] {
        case "MOVED": self = .moved(slot: slot, to: to)
        case "ASK": self = .ask(slot: slot, to: to)
        default: return nil
        }
    }
}

/// Which master serves which slots: the answer to `CLUSTER SLOTS`.
struct RedisClusterTopology: Equatable {
    /// One entry per slot; nil where no master serves it (the cluster is
    /// then not `ok` for those keys).
    var masters: [RedisNodeAddress?]

    /// Every distinct master, in a stable order (for walks like SCAN).
    var distinctMasters: [RedisNodeAddress] {
        var seen = Set<RedisNodeAddress>()
        var out: [RedisNodeAddress] = []
        for case let m? in masters where seen.insert(m).inserted { out.append(m) }
        return out.sorted { ($0.host, $0.port) < ($1.host, $1.port) }
    }

    /// `CLUSTER SLOTS`: `[[start, end, [host, port, id, ...], replicas...], ...]`.
    /// `askedHost` stands in for an empty host.
    init(clusterSlots reply: RESPValue, askedHost: String) throws(RedisError) {
        guard case .array(let ranges) = reply else { throw .unexpectedReply("CLUSTER SLOTS") }
        var masters = [RedisNodeAddress?](repeating: nil, count: RedisHashSlot.count)
        for range in ranges {
            guard case .array(let r) = range, r.count >= 3, let start = r[0].int64, let end = r[1].int64,
                0 <= start, start <= end, end < Int64(RedisHashSlot.count),
                case .array(let node) = r[2], node.count >= 2, let port = node[1].int64, (1...65535).contains(port)
            else { throw .unexpectedReply("CLUSTER SLOTS entry") }
            // An empty host is the node asked; "?" (endpoint unknown) leaves
            // the range unserved until a later map knows better.
            let host = node[0].string ?? ""
            guard host != "?" else { continue }
            let address = RedisNodeAddress(host: host.isEmpty ? askedHost : host, port: Int(port))
            for s in Int(start)...Int(end) { masters[s] = address }
        }
        self.masters = masters
    }
}
