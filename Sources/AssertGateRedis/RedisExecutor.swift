import NIOCore

/// What `RedisStore` sends its commands through: one server (`RedisClient`)
/// or a cluster (`RedisClusterClient`, which routes each command to the
/// master serving `slot` and follows `MOVED`/`ASK`). A standalone server
/// ignores `slot`. Completions run on `eventLoop`.
public protocol RedisExecutor: AnyObject, Sendable {
    var eventLoop: EventLoop { get }
    /// A cluster: a script may only touch keys of one slot.
    var isCluster: Bool { get }

    /// One command; error replies arrive as `.success(.error(...))`.
    func send(_ command: RESPCommand, slot: UInt16, completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void)

    /// `command` is the complete `EVALSHA` of `script` (reloaded on `NOSCRIPT`).
    func evalSHA<T: Sendable>(
        _ script: RedisScript, command: RESPCommand, slot: UInt16,
        _ transform: @escaping @Sendable (RESPValue) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void)

    /// A client per master (the one server, standalone): for commands that
    /// must visit every node, such as `SCAN` and `PING`.
    func masters() -> EventLoopFuture<[RedisClient]>

    /// Whether the store can serve: the server answers `PING` (a cluster:
    /// see `RedisClusterClient.ping`).
    func ping() -> EventLoopFuture<Void>

    func shutdown() -> EventLoopFuture<Void>
}

extension RedisExecutor {
    public func send(_ command: RESPCommand, slot: UInt16) -> EventLoopFuture<RESPValue> {
        let promise = eventLoop.makePromise(of: RESPValue.self)
        send(command, slot: slot) { promise.completeWith($0) }
        return promise.futureResult
    }

    /// Routed by the slot of `key` (hash tags honoured).
    public func send(key: String, _ command: RESPCommand) -> EventLoopFuture<RESPValue> {
        send(command, slot: isCluster ? RedisHashSlot.slot(forKey: key) : 0)
    }

    /// `EVALSHA` of `script` over `keys` (routed by the first key's slot).
    public func evalSHA(_ script: RedisScript, keys: [String], arguments: [RESPArgument]) -> EventLoopFuture<RESPValue> {
        var args: [RESPArgument] = ["EVALSHA", .string(script.sha1), .integer(Int64(keys.count))]
        args.reserveCapacity(3 + keys.count + arguments.count)
        args.append(contentsOf: keys.map { .string($0) })
        args.append(contentsOf: arguments)
        let promise = eventLoop.makePromise(of: RESPValue.self)
        let slot = isCluster ? keys.first.map { RedisHashSlot.slot(forKey: $0) } ?? 0 : 0
        evalSHA(script, command: RESPCommand(args), slot: slot, { $0 }) { promise.completeWith($0) }
        return promise.futureResult
    }
}

extension RedisClient: RedisExecutor {
    public var isCluster: Bool { false }

    public func send(
        _ command: RESPCommand, slot: UInt16, completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        send(command, asking: false, completion: completion)
    }

    public func evalSHA<T: Sendable>(
        _ script: RedisScript, command: RESPCommand, slot: UInt16,
        _ transform: @escaping @Sendable (RESPValue) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        evalSHA(script, command: command, asking: false, transform, completion: completion)
    }

    public func masters() -> EventLoopFuture<[RedisClient]> {
        eventLoop.makeSucceededFuture([self])
    }

    public func ping() -> EventLoopFuture<Void> {
        send("PING").flatMapThrowing { reply in
            guard case .status("PONG") = reply else { throw RedisError.unexpected(reply, "PING") }
        }
    }
}
