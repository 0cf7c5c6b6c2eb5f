import Logging
import NIOCore

/// Redis Cluster for ONE event loop (a gateway worker): a `RedisClient` per
/// master, and the slot map (`CLUSTER SLOTS`) that routes each command to
/// the master serving its keys' slot.
///
/// - The map is read at start from the seeds, and again (at most every
///   `minRefreshInterval`) after a `MOVED`, a `CLUSTERDOWN`, a slot nobody
///   serves or a node that cannot be reached, so a failover or a resharding is
///   picked up by the next commands.
/// - `MOVED` updates that slot at once and resends; `ASK` resends once to the
///   importing node, after `ASKING` on the same connection; `TRYAGAIN` (keys
///   of one script split by a migration in progress) retries shortly. At most
///   `maxRedirects` hops per command.
/// - Until the first map arrives commands are held (as a `RedisClient` holds
///   them while it connects); when no map can be had they fail at once with
///   the reason, like a standalone outage.
///
/// `@unchecked Sendable`: every stored `var` is confined to `eventLoop`.
public final class RedisClusterClient: RedisExecutor, @unchecked Sendable {
    public let eventLoop: EventLoop
    public var isCluster: Bool { true }
    /// Credentials, TLS, timeouts and connections per node; `url`'s host and
    /// port are replaced per node.
    public let configuration: RedisClientConfiguration
    public let seeds: [RedisNodeAddress]
    public let scripts: [RedisScript]

    static let maxRedirects = 5
    static let minRefreshInterval = TimeAmount.milliseconds(250)
    static let tryAgainDelay = TimeAmount.milliseconds(25)

    private var topology: RedisClusterTopology?
    private var clients: [RedisNodeAddress: RedisClient] = [:]
    private var refreshing = false
    private var lastRefresh: NIODeadline?
    private var scheduledRefresh: Scheduled<Void>?
    private var lastRefreshError: StoreError?
    private var waiting: [@Sendable (Result<RedisClusterTopology, StoreError>) -> Void] = []
    private var isShutdown = false

    public init(configuration: RedisClientConfiguration, seeds: [RedisNodeAddress], eventLoop: EventLoop, scripts: [RedisScript] = []) {
        precondition(!seeds.isEmpty, "a cluster needs at least one seed node")
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.seeds = seeds
        self.scripts = scripts
        eventLoop.execute { self.refresh() }
    }

    // MARK: RedisExecutor

    public func send(
        _ command: RESPCommand, slot: UInt16, completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        run(slot: slot, hops: 0, askTo: nil, completion: completion) { client, asking, done in
            client.send(command, asking: asking, completion: done)
        }
    }

    public func evalSHA<T: Sendable>(
        _ script: RedisScript, command: RESPCommand, slot: UInt16,
        _ transform: @escaping @Sendable (RESPValue) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        run(slot: slot, hops: 0, askTo: nil, completion: { result in
            completion(result.flatMap { reply in Result { try transform(reply) } })
        }) { client, asking, done in
            client.evalSHA(script, command: command, asking: asking, { $0 }, completion: done)
        }
    }

    public func masters() -> EventLoopFuture<[RedisClient]> {
        let promise = eventLoop.makePromise(of: [RedisClient].self)
        onLoop {
            self.withTopology { result in
                switch result {
                case .success(let t): promise.succeed(t.distinctMasters.map { self.client(for: $0) })
                case .failure(let e): promise.fail(e)
                }
            }
        }
        return promise.futureResult
    }

    public func shutdown() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.isShutdown = true
            self.scheduledRefresh?.cancel()
            self.scheduledRefresh = nil
            let w = self.waiting
            self.waiting = []
            for f in w { f(.failure(.unavailable(.shutdown))) }
            let all = Array(self.clients.values)
            self.clients = [:]
            return EventLoopFuture.andAllComplete(all.map { $0.shutdown() }, on: self.eventLoop)
        }
    }

    /// The master serving `slot` in the current map (nil: unknown yet, or none); for tests and logs.
    public func master(forSlot slot: UInt16) -> EventLoopFuture<RedisNodeAddress?> {
        eventLoop.submit { self.topology?.masters[Int(slot)] }
    }

    // MARK: routing

    private typealias Attempt = @Sendable (RedisClient, Bool, @escaping @Sendable (Result<RESPValue, any Error>) -> Void) -> Void

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { body() } else { eventLoop.execute(body) }
    }

    /// Sends through `attempt` to the master of `slot` (or to `askTo`), and
    /// follows what the cluster answers.
    private func run(
        slot: UInt16, hops: Int, askTo: RedisNodeAddress?,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void, _ attempt: @escaping Attempt
    ) {
        onLoop {
            guard !self.isShutdown else { return completion(.failure(StoreError.unavailable(.shutdown))) }
            if let askTo {
                self.attempt(on: askTo, asking: true, slot: slot, hops: hops, completion: completion, attempt)
                return
            }
            self.withTopology { result in
                switch result {
                case .failure(let e):
                    completion(.failure(e))
                case .success(let t):
                    guard let address = t.masters[Int(slot)] else {
                        self.refreshSoon()
                        completion(.failure(StoreError.serverError("CLUSTERDOWN: no master serves slot \(slot)")))
                        return
                    }
                    self.attempt(on: address, asking: false, slot: slot, hops: hops, completion: completion, attempt)
                }
            }
        }
    }

    private func attempt(
        on address: RedisNodeAddress, asking: Bool, slot: UInt16, hops: Int,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void, _ attempt: @escaping Attempt
    ) {
        attempt(client(for: address), asking) { result in
            self.eventLoop.assertInEventLoop()
            switch result {
            case .success(.error(let message)):
                if let redirect = RedisRedirect(errorMessage: message, defaultHost: address.host) {
                    guard hops < Self.maxRedirects else {
                        completion(.failure(StoreError.serverError("cluster: more than \(Self.maxRedirects) redirects for slot \(slot)")))
                        return
                    }
                    switch redirect {
                    case .moved(let movedSlot, let to):
                        self.topology?.masters[Int(movedSlot)] = to
                        self.refreshSoon()
                        self.run(slot: slot, hops: hops + 1, askTo: nil, completion: completion, attempt)
                    case .ask(_, let to):
                        self.run(slot: slot, hops: hops + 1, askTo: to, completion: completion, attempt)
                    }
                    return
                }
                if message.hasPrefix("TRYAGAIN"), hops < Self.maxRedirects {
                    self.eventLoop.scheduleTask(in: Self.tryAgainDelay) {
                        self.run(slot: slot, hops: hops + 1, askTo: nil, completion: completion, attempt)
                    }
                    return
                }
                if message.hasPrefix("CLUSTERDOWN") { self.refreshSoon() }
                completion(result)
            case .failure(let error):
                // A node that cannot be reached may have failed over.
                if case .unavailable = error as? StoreError { self.refreshSoon() }
                completion(result)
            case .success:
                completion(result)
            }
        }
    }

    private func client(for address: RedisNodeAddress) -> RedisClient {
        if let c = clients[address] { return c }
        var node = configuration
        node.url.host = address.host
        node.url.port = address.port
        let c = RedisClient(configuration: node, eventLoop: eventLoop, scripts: scripts)
        clients[address] = c
        return c
    }

    // MARK: the slot map

    /// Calls `body` with the map: now if there is one, after the refresh in
    /// flight (or one started now) otherwise, or at once with the last
    /// refresh's failure when none can start yet.
    private func withTopology(_ body: @escaping @Sendable (Result<RedisClusterTopology, StoreError>) -> Void) {
        eventLoop.assertInEventLoop()
        if let topology { return body(.success(topology)) }
        if !refreshing { refreshSoon() }
        guard refreshing else {
            return body(.failure(lastRefreshError ?? .unavailable(.notConnected)))
        }
        guard waiting.count < configuration.maxQueuedWhileConnecting else {
            return body(.failure(.unavailable(.overloaded)))
        }
        waiting.append(body)
    }

    /// A refresh now, or at the end of the current `minRefreshInterval`.
    private func refreshSoon() {
        eventLoop.assertInEventLoop()
        guard !refreshing, !isShutdown, scheduledRefresh == nil else { return }
        if let last = lastRefresh, NIODeadline.now() < last + Self.minRefreshInterval {
            scheduledRefresh = eventLoop.scheduleTask(deadline: last + Self.minRefreshInterval) {
                self.scheduledRefresh = nil
                self.refresh()
            }
            return
        }
        refresh()
    }

    private func refresh() {
        eventLoop.assertInEventLoop()
        guard !refreshing, !isShutdown else { return }
        refreshing = true
        lastRefresh = .now()
        // The masters we know first (they know the newest map), then the seeds.
        var candidates = topology?.distinctMasters ?? []
        for s in seeds where !candidates.contains(s) { candidates.append(s) }
        ask(candidates, 0, firstError: nil)
    }

    private func ask(_ candidates: [RedisNodeAddress], _ i: Int, firstError: StoreError?) {
        guard i < candidates.count else {
            return finishRefresh(.failure(firstError ?? .unavailable(.notConnected)))
        }
        let address = candidates[i]
        client(for: address).send(Self.clusterSlots, asking: false) { result in
            let outcome: Result<RedisClusterTopology, StoreError>
            switch result {
            case .success(.error(let message)):
                outcome = .failure(.serverError("CLUSTER SLOTS at \(address): \(message)"))
            case .success(let reply):
                outcome = Result { () throws(StoreError) in try RedisClusterTopology(clusterSlots: reply, askedHost: address.host) }
            case .failure(let error):
                outcome = .failure(error as? StoreError ?? .unavailable(.connectFailed("\(address): \(error)")))
            }
            switch outcome {
            case .success(let t) where t.distinctMasters.isEmpty:
                self.ask(candidates, i + 1, firstError: firstError ?? .serverError("CLUSTER SLOTS at \(address): no slot is served"))
            case .success(let t):
                self.finishRefresh(.success(t))
            case .failure(let e):
                self.ask(candidates, i + 1, firstError: firstError ?? e)
            }
        }
    }

    private static let clusterSlots = RESPCommand("CLUSTER", "SLOTS")

    private func finishRefresh(_ result: Result<RedisClusterTopology, StoreError>) {
        eventLoop.assertInEventLoop()
        refreshing = false
        if isShutdown { return }
        switch result {
        case .success(let t):
            if topology != t {
                configuration.logger?.info(
                    "redis cluster map", metadata: ["masters": "\(t.distinctMasters.map(\.description).joined(separator: ","))"])
            }
            topology = t
            lastRefreshError = nil
            // Nodes that serve no slot any more (a seed that is a replica, a
            // failed master) are let go.
            let keep = Set(t.distinctMasters)
            for (address, c) in clients where !keep.contains(address) {
                clients[address] = nil
                _ = c.shutdown()
            }
        case .failure(let e):
            if lastRefreshError == nil {
                configuration.logger?.warning("redis cluster map unavailable", metadata: ["reason": "\(e)"])
            }
            lastRefreshError = e
        }
        let w = waiting
        waiting = []
        for f in w { f(result) }
    }
}
