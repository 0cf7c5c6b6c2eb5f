/// What a `RedisClusterClient` reports while it routes, for whoever counts
/// it (the gateway's metrics). Called on the client's event loop; every
/// worker's client may report to the same observer.
public protocol RedisClusterObserver: Sendable {
    func clusterEvent(_ event: RedisClusterEvent)
}

public enum RedisClusterEvent: Sendable, Hashable {
    /// A `-MOVED` reply: the slot lives elsewhere now.
    case moved
    /// A `-ASK` reply: the key is being migrated, asked at its new node.
    case ask
    /// A `-TRYAGAIN` reply, retried.
    case tryAgain
    /// A slot map was read.
    case mapRefreshed
    /// No node gave a slot map.
    case mapRefreshFailed
}
