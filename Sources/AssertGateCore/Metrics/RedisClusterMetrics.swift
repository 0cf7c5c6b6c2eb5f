import AssertGateRedis

/// What a `RedisClusterClient` counts (every worker's client adds to the same counters).
public struct RedisClusterMetrics: Sendable {
    public let moved: Counter
    public let ask: Counter
    public let tryAgain: Counter
    public let mapRefreshed: Counter
    public let mapRefreshFailed: Counter

    public init(moved: Counter, ask: Counter, tryAgain: Counter, mapRefreshed: Counter, mapRefreshFailed: Counter) {
        self.moved = moved
        self.ask = ask
        self.tryAgain = tryAgain
        self.mapRefreshed = mapRefreshed
        self.mapRefreshFailed = mapRefreshFailed
    }
}

extension RedisClusterMetrics: RedisClusterObserver {
    public func clusterEvent(_ event: RedisClusterEvent) {
        switch event {
        case .moved: moved.inc()
        case .ask: ask.inc()
        case .tryAgain: tryAgain.inc()
        case .mapRefreshed: mapRefreshed.inc()
        case .mapRefreshFailed: mapRefreshFailed.inc()
        }
    }
}
