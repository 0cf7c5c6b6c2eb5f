import NIOCore

/// Builds the store provider `store:` of the configuration asks for: one
/// `RedisStore` (own connections) per event loop of `group`, or one
/// `MemoryStore` state shared by all loops.
public enum StoreFactory {
    public static func makeProvider(_ config: StoreConfig, group: EventLoopGroup) throws -> any StoreProvider {
        switch config {
        case .memory:
            return MemoryStore(eventLoop: group.next())
        case .redis(let redis):
            return RedisStoreGroup(configuration: try RedisClientConfiguration(redis), group: group)
        }
    }
}
