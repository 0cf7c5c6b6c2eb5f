import AssertGateRedis
import Logging
import NIOCore

/// Builds the store provider `store:` of the configuration asks for: one
/// `RedisStore` (own connections) per event loop of `group`, or one
/// `MemoryStore` state shared by all loops.
public enum StoreFactory {
    public static func makeProvider(
        _ config: StoreConfig, group: EventLoopGroup, logger: Logger? = nil, metrics: GatewayMetrics? = nil
    ) throws
        -> any StoreProvider
    {
        switch config {
        case .memory:
            return MemoryStore(eventLoop: group.next())
        case .redis(let redis):
            var configuration = try RedisClientConfiguration(redis)
            configuration.logger = logger
            configuration.clusterObserver = metrics?.redisCluster
            return RedisStoreGroup(configuration: configuration, group: group)
        }
    }
}
