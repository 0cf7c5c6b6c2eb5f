/// What each downstream client holds in one endpoint pool, for
/// `maxConnectionsPerClient`: connections on HTTP/1.1, streams on HTTP/2.
///
/// The requests of one downstream connection come from one address, so most
/// leases and releases in a row are the same client's, and often its count
/// goes 0 → 1 → 0 with each request. The share counted last is therefore kept
/// outside the table while it stays the current one: taking and giving it
/// back hashes nothing. The table holds every other client holding something.
struct ClientShares {
    private final class Share {
        let client: String
        var count = 0
        var inTable = false
        init(client: String) { self.client = client }
    }
    /// Clients holding something, except perhaps `current`.
    private var table: [String: Share] = [:]
    /// The share counted last (its count may be 0).
    private var current: Share?

    func count(_ client: String?) -> Int {
        guard let client else { return 0 }
        if let current, current.client == client { return current.count }
        return table[client]?.count ?? 0
    }

    mutating func take(_ client: String?) {
        guard let client else { return }
        switchTo(client).count += 1
    }

    mutating func give(_ client: String?) {
        guard let client else { return }
        let s = switchTo(client)
        if s.count > 0 { s.count -= 1 }
    }

    /// Makes `client`'s share the current one; the one it replaces goes into
    /// the table if it holds something, out of it if not.
    @inline(__always)
    private mutating func switchTo(_ client: String) -> Share {
        if let current, current.client == client { return current }
        if let old = current {
            if old.count > 0, !old.inTable {
                table[old.client] = old
                old.inTable = true
            } else if old.count == 0, old.inTable {
                table[old.client] = nil
                old.inTable = false
            }
        }
        let s = table[client] ?? Share(client: client)
        current = s
        return s
    }
}
