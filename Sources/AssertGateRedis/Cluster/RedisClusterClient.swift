import Logging
import NIOCore

/// Redis Cluster for ONE event loop (a gateway worker): a `RedisClient` per
/// master, and the slot map (`CLUSTER SLOTS`) that routes each command to
/// the master serving its keys' slot.
///
/// - The map is read at start from the seeds, every `periodicRefresh`, and
///   again (at most every `minRefreshInterval`) after a `MOVED`, a
///   `CLUSTERDOWN`, a slot nobody serves or a node that cannot be reached, so
///   a failover or a resharding is picked up with or without traffic.
/// - `MOVED` updates that slot at once and resends; `ASK` resends once to the
///   importing node, after `ASKING` on the same connection (`maxRedirects`
///   hops per command). `TRYAGAIN` (keys of one script split by a migration
///   in progress) retries `maxTryAgain` times, `tryAgainDelay` apart.
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
    static let maxTryAgain = 5
    static let minRefreshInterval = TimeAmount.milliseconds(250)
    static let periodicRefresh = TimeAmount.seconds(10)
    static let tryAgainDelay = TimeAmount.milliseconds(25)
    /// A node that served an `ASK` (a master-to-be that owns no slot yet)
    /// keeps its connections this long after its last use.
    static let askTargetGrace = TimeAmount.seconds(60)

    private var topology: RedisClusterTopology?
    private var clients: [RedisNodeAddress: RedisClient] = [:]
    private var askTargets: [RedisNodeAddress: NIODeadline] = [:]
    private var refreshing = false
    private var lastRefresh: NIODeadline?
    private var scheduledRefresh: Scheduled<Void>?
    private var periodic: RepeatedTask?
    private var lastRefreshError: RedisError?
    private var waiting: [@Sendable (Result<RedisClusterTopology, RedisError>) -> Void] = []
    private var isShutdown = false

    public init(configuration: RedisClientConfiguration, seeds: [RedisNodeAddress], eventLoop: EventLoop, scripts: [RedisScript] = []) {
        precondition(!seeds.isEmpty, "a cluster needs at least one seed node")
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.seeds = seeds
        self.scripts = scripts
        eventLoop.execute {
            self.refresh()
            self.periodic = eventLoop.scheduleRepeatedTask(
                initialDelay: Self.periodicRefresh, delay: Self.periodicRefresh
            ) { _ in self.refreshSoon() }
        }
    }

    // MARK: RedisExecutor

    public func send(
        _ command: RESPCommand, slot: UInt16, completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        // Not the hot path (that is `evalSHA`): the general route serves.
        run(Route(slot: slot), askTo: nil, completion: completion) { client, asking, done in
            client.send(command, asking: asking, completion: done)
        }
    }

    public func evalSHA<T: Sendable>(
        _ script: RedisScript, command: RESPCommand, slot: UInt16,
        _ transform: @escaping @Sendable (RESPValue) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        // The hot path: on the loop, with the slot's master known and its
        // client made, the command goes straight out; only an answer that is
        // about the cluster (a redirect, a failure) takes the general path.
        if let (client, address) = currentMaster(slot) {
            client.evalSHA(script, command: command, asking: false, { $0 }) { result in
                if case .success(let reply) = result, !Self.concernsCluster(reply) {
                    completion(Result { try transform(reply) })
                    return
                }
                self.settle(result, from: address, asking: false, Route(slot: slot), completion: { result in
                    completion(result.flatMap { reply in Result { try transform(reply) } })
                }) { client, asking, done in
                    client.evalSHA(script, command: command, asking: asking, { $0 }, completion: done)
                }
            }
            return
        }
        run(Route(slot: slot), askTo: nil, completion: { result in
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
                case .success(let t):
                    let clients = t.distinctMasters.compactMap { self.client(for: $0) }
                    if clients.isEmpty {
                        promise.fail(RedisError.unavailable(.shutdown))
                    } else {
                        promise.succeed(clients)
                    }
                case .failure(let e):
                    promise.fail(e)
                }
            }
        }
        return promise.futureResult
    }

    /// Ready when the map serves every slot and a majority of the masters
    /// answer `PING`: one shard down fails its own keys (and triggers a map
    /// refresh, which finds a promoted replica), but does not take every
    /// gateway out of its load balancer; a gateway cut off from most of the
    /// cluster does leave it.
    public func ping() -> EventLoopFuture<Void> {
        masters().flatMap { masters in
            let pings = masters.map { m in m.ping().map { true }.recover { _ in false } }
            return EventLoopFuture.whenAllSucceed(pings, on: self.eventLoop).flatMapThrowing { answers in
                let answered = answers.filter { $0 }.count
                let unserved = self.topology?.masters.contains(nil) ?? true
                if answered < answers.count || unserved { self.refreshSoon() }
                if unserved { throw RedisError.serverError("cluster: some slots have no master") }
                guard answered * 2 > answers.count else {
                    throw RedisError.unavailable(.connectFailed("cluster: \(answered) of \(answers.count) masters answered PING"))
                }
            }
        }.flatMapErrorThrowing { error in
            self.refreshSoon()
            throw error
        }
    }

    public func shutdown() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.isShutdown = true
            self.scheduledRefresh?.cancel()
            self.scheduledRefresh = nil
            self.periodic?.cancel()
            self.periodic = nil
            let w = self.waiting
            self.waiting = []
            for f in w { f(.failure(.unavailable(.shutdown))) }
            let all = Array(self.clients.values)
            self.clients = [:]
            return EventLoopFuture.andAllComplete(all.map { $0.shutdown() }, on: self.eventLoop)
        }
    }

    /// How many node clients exist (for tests: none after shutdown).
    var nodeClientCount: EventLoopFuture<Int> {
        eventLoop.submit { self.clients.count }
    }

    /// The master serving `slot` in the current map (nil: unknown yet, or none); for tests and logs.
    public func master(forSlot slot: UInt16) -> EventLoopFuture<RedisNodeAddress?> {
        eventLoop.submit { self.topology?.masters[Int(slot)] }
    }

    // MARK: routing

    private typealias Attempt = @Sendable (RedisClient, Bool, @escaping @Sendable (Result<RESPValue, any Error>) -> Void) -> Void

    /// Where a command is in its journey through the cluster.
    private struct Route {
        var slot: UInt16
        var redirects = 0
        var tryAgains = 0
    }

    /// The fast path's lookup: on the loop, a map, a master for `slot` and a client made for it.
    private func currentMaster(_ slot: UInt16) -> (RedisClient, RedisNodeAddress)? {
        guard eventLoop.inEventLoop, !isShutdown, let address = topology?.masters[Int(slot)],
            let client = clients[address]
        else { return nil }
        return (client, address)
    }

    /// Replies that are about the cluster rather than the command.
    private static func concernsCluster(_ reply: RESPValue) -> Bool {
        guard case .error(let m) = reply else { return false }
        return m.hasPrefix("MOVED ") || m.hasPrefix("ASK ") || m.hasPrefix("TRYAGAIN") || m.hasPrefix("CLUSTERDOWN")
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { body() } else { eventLoop.execute(body) }
    }

    /// Sends through `attempt` to the master of the route's slot (or to
    /// `askTo`, after `ASKING`), and follows what the cluster answers.
    private func run(
        _ route: Route, askTo: RedisNodeAddress?,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void, _ attempt: @escaping Attempt
    ) {
        onLoop {
            if let askTo {
                self.askTargets[askTo] = .now()
                self.send(on: askTo, asking: true, route, completion: completion, attempt)
                return
            }
            self.withTopology { result in
                switch result {
                case .failure(let e):
                    completion(.failure(e))
                case .success(let t):
                    guard let address = t.masters[Int(route.slot)] else {
                        self.refreshSoon()
                        completion(.failure(RedisError.serverError("CLUSTERDOWN: no master serves slot \(route.slot)")))
                        return
                    }
                    self.send(on: address, asking: false, route, completion: completion, attempt)
                }
            }
        }
    }

    private func send(
        on address: RedisNodeAddress, asking: Bool, _ route: Route,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void, _ attempt: @escaping Attempt
    ) {
        guard let client = client(for: address) else {
            return completion(.failure(RedisError.unavailable(.shutdown)))
        }
        attempt(client, asking) { result in
            self.settle(result, from: address, asking: asking, route, completion: completion, attempt)
        }
    }

    /// What `address` answered: passed on, or followed (redirect, TRYAGAIN).
    private func settle(
        _ result: Result<RESPValue, any Error>, from address: RedisNodeAddress, asking: Bool, _ route: Route,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void, _ attempt: @escaping Attempt
    ) {
        eventLoop.assertInEventLoop()
        var next = route
        switch result {
        case .success(.error(let message)):
            if let redirect = RedisRedirect(errorMessage: message, defaultHost: address.host) {
                guard route.redirects < Self.maxRedirects else {
                    completion(.failure(RedisError.serverError(
                        "cluster: more than \(Self.maxRedirects) redirects for slot \(route.slot)")))
                    return
                }
                next.redirects += 1
                switch redirect {
                case .moved(let movedSlot, let to):
                    configuration.clusterObserver?.clusterEvent(.moved)
                    topology?.masters[Int(movedSlot)] = to
                    refreshSoon()
                    run(next, askTo: nil, completion: completion, attempt)
                case .ask(_, let to):
                    configuration.clusterObserver?.clusterEvent(.ask)
                    run(next, askTo: to, completion: completion, attempt)
                }
                return
            }
            if message.hasPrefix("TRYAGAIN"), route.tryAgains < Self.maxTryAgain {
                next.tryAgains += 1
                configuration.clusterObserver?.clusterEvent(.tryAgain)
                // The same node again (after ASKING if that is how it was reached).
                let retry = next
                eventLoop.scheduleTask(in: Self.tryAgainDelay) {
                    self.run(retry, askTo: asking ? address : nil, completion: completion, attempt)
                }
                return
            }
            if message.hasPrefix("CLUSTERDOWN") { refreshSoon() }
            completion(result)
        case .failure(let error):
            // A node that cannot be reached may have failed over.
            if case .unavailable = error as? RedisError { refreshSoon() }
            completion(result)
        case .success:
            completion(result)
        }
    }

    /// nil once shut down: nothing new is connected after that.
    private func client(for address: RedisNodeAddress) -> RedisClient? {
        if let c = clients[address] { return c }
        guard !isShutdown else { return nil }
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
    private func withTopology(_ body: @escaping @Sendable (Result<RedisClusterTopology, RedisError>) -> Void) {
        eventLoop.assertInEventLoop()
        guard !isShutdown else { return body(.failure(.unavailable(.shutdown))) }
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

    private func ask(_ candidates: [RedisNodeAddress], _ i: Int, firstError: RedisError?) {
        guard i < candidates.count else {
            return finishRefresh(.failure(firstError ?? .unavailable(.notConnected)))
        }
        let address = candidates[i]
        guard let client = client(for: address) else {
            return finishRefresh(.failure(.unavailable(.shutdown)))
        }
        client.send(Self.clusterSlots, asking: false) { result in
            let outcome: Result<RedisClusterTopology, RedisError>
            switch result {
            case .success(.error(let message)):
                outcome = .failure(.serverError("CLUSTER SLOTS at \(address): \(message)"))
            case .success(let reply):
                outcome = Result { () throws(RedisError) in try RedisClusterTopology(clusterSlots: reply, askedHost: address.host) }
            case .failure(let error):
                outcome = .failure(error as? RedisError ?? .unavailable(.connectFailed("\(address): \(error)")))
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

    private func finishRefresh(_ result: Result<RedisClusterTopology, RedisError>) {
        eventLoop.assertInEventLoop()
        refreshing = false
        if isShutdown { return }
        switch result {
        case .success(let t):
            configuration.clusterObserver?.clusterEvent(.mapRefreshed)
            if topology != t {
                configuration.logger?.info(
                    "redis cluster map", metadata: ["masters": "\(t.distinctMasters.map(\.description).joined(separator: ","))"])
            }
            topology = t
            lastRefreshError = nil
            // Nodes that serve no slot any more (a seed that is a replica, a
            // failed master) are let go; a node being migrated to, which
            // serves no slot yet, stays while it answers ASKs.
            let now = NIODeadline.now()
            askTargets = askTargets.filter { now < $0.value + Self.askTargetGrace }
            let keep = Set(t.distinctMasters).union(askTargets.keys)
            for (address, c) in clients where !keep.contains(address) {
                clients[address] = nil
                _ = c.shutdown()
            }
        case .failure(let e):
            configuration.clusterObserver?.clusterEvent(.mapRefreshFailed)
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
