import GatewayTLS
import Logging
import NIOCore
import NIOPosix

/// A small pool of pipelined Redis connections owned by ONE event loop (a
/// gateway worker). All mutable state is touched only on that loop, so there
/// are no locks; calls from other threads hop onto it. Connections reconnect
/// by themselves with exponential backoff.
///
/// What a command sees when no connection is up:
/// - A connect attempt is in flight (the first one at startup, or a reconnect
///   after Redis came back): the command is HELD and sent as soon as the
///   handshake (AUTH, SELECT, SCRIPT LOAD) is done. Requests arriving right
///   after start or during a reconnect must not fail spuriously just because
///   they beat the handshake by a millisecond. The hold is bounded: a whole
///   attempt (TCP + handshake) is abandoned after `connectTimeout`, and at most
///   `maxQueuedWhileConnecting` commands wait per connection (more fail with
///   `.overloaded`).
/// - No attempt is in flight (the backoff timer is waiting): the command fails
///   AT ONCE with the reason of the last failure (`.connectFailed("AUTH: …")`
///   after a refused handshake, `.notConnected` after a lost connection), so a
///   Redis outage costs callers nothing but a fast 503, never a wait.
/// Which of the two a command meets never depends on how fast the caller's
/// thread got to the loop: a command issued after an attempt has failed gets
/// that attempt's error, just like the commands that were held during it.
///
/// `@unchecked Sendable`: every stored `var` is confined to `eventLoop`
/// (checked with `assertInEventLoop`), the same discipline NIO's own channels use.
public final class RedisClient: @unchecked Sendable {
    public let eventLoop: EventLoop
    public let configuration: RedisClientConfiguration
    /// Scripts loaded with `SCRIPT LOAD` on every new connection.
    public let scripts: [RedisScript]

    private let slots: [Slot]
    private var nextSlot = 0
    private var isShutdown = false

    /// Creates the client and starts connecting (asynchronously, on `eventLoop`).
    public init(configuration: RedisClientConfiguration, eventLoop: EventLoop, scripts: [RedisScript] = []) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.scripts = scripts
        self.slots = (0..<configuration.connections).map { _ in Slot() }
        // On the loop already (a cluster client adding a node), the attempts
        // start now, so a command sent right after is held, not refused.
        if eventLoop.inEventLoop {
            for slot in slots { connect(slot) }
        } else {
            eventLoop.execute { [self] in
                for slot in slots { connect(slot) }
            }
        }
    }

    // MARK: public API

    /// Sends one command; the future completes on `eventLoop`.
    public func send(_ command: RESPCommand) -> EventLoopFuture<RESPValue> {
        if eventLoop.inEventLoop {
            return sendOnLoop(command)
        }
        return eventLoop.flatSubmit { self.sendOnLoop(command) }
    }

    public func send(_ arguments: RESPArgument...) -> EventLoopFuture<RESPValue> {
        send(RESPCommand(arguments))
    }

    /// `command` is the complete `EVALSHA` of `script` (on `NOSCRIPT` the
    /// script is loaded and the command retried once); `transform` turns the
    /// reply into the caller's type, handed to `completion` on `eventLoop`: no
    /// promise, no future (the store's commit path). `asking`: precede the
    /// command with `ASKING` on the same connection (a cluster's `-ASK`).
    func evalSHA<T: Sendable>(
        _ script: RedisScript, command: RESPCommand, asking: Bool = false,
        _ transform: @escaping @Sendable (RESPValue) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let request = RedisRequest(command: command, target: .callback { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(.error(let message)) where message.hasPrefix("NOSCRIPT"):
                self.reloadAndRetry(script, command, asking: asking).whenComplete { retried in
                    completion(retried.flatMap { reply in Result { try transform(reply) } })
                }
            case .success(let reply):
                completion(Result { try transform(reply) })
            }
        })
        submit(request, asking: asking)
    }

    /// One command, its reply (error replies included) handed to `completion`
    /// on `eventLoop`; `asking` as for `evalSHA`.
    func send(
        _ command: RESPCommand, asking: Bool, completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        submit(RedisRequest(command: command, target: .callback(completion)), asking: asking)
    }

    private func submit(_ request: RedisRequest, asking: Bool) {
        let preceding = asking ? RedisRequest(command: Self.askingCommand, target: .callback { _ in }) : nil
        if eventLoop.inEventLoop {
            enqueueOnLoop(request, after: preceding)
        } else {
            eventLoop.execute { self.enqueueOnLoop(request, after: preceding) }
        }
    }

    private static let askingCommand = RESPCommand("ASKING")

    /// The retry keeps `ASKING` in front when the first try had it.
    private func reloadAndRetry(_ script: RedisScript, _ command: RESPCommand, asking: Bool) -> EventLoopFuture<RESPValue> {
        sendOnLoop(RESPCommand("SCRIPT", "LOAD", .string(script.source))).flatMap { loaded in
            if case .error(let e) = loaded {
                return self.eventLoop.makeFailedFuture(RedisError.serverError("SCRIPT LOAD: \(e)"))
            }
            let promise = self.eventLoop.makePromise(of: RESPValue.self)
            self.submit(RedisRequest(command: command, promise: promise), asking: asking)
            return promise.futureResult
        }
    }

    /// Each connection's failed-attempt count, the backoff exponent (tests).
    func backoffAttempts() -> EventLoopFuture<[Int]> {
        eventLoop.submit { self.slots.map(\.attempt) }
    }

    /// True when at least one connection is up (for readiness).
    func isConnected() -> EventLoopFuture<Bool> {
        eventLoop.submit {
            self.slots.contains { if case .ready = $0.state { return true } else { return false } }
        }
    }

    /// Closes every connection and fails queued commands; the client cannot be reused.
    public func shutdown() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.isShutdown = true
            var closes: [EventLoopFuture<Void>] = []
            for slot in self.slots {
                slot.reconnect?.cancel()
                slot.reconnect = nil
                slot.attemptTimer?.cancel()
                slot.attemptTimer = nil
                let previous = slot.state
                slot.state = .backoff(.unavailable(.shutdown))
                switch previous {
                case .ready(let channel, _):
                    closes.append(channel.close().recover { _ in })
                case .connecting(let queued):
                    for r in queued { r.fail(RedisError.unavailable(.shutdown)) }
                case .backoff, .idle:
                    break
                }
            }
            return EventLoopFuture.andAllComplete(closes, on: self.eventLoop)
        }
    }

    // MARK: sending

    private func sendOnLoop(_ command: RESPCommand) -> EventLoopFuture<RESPValue> {
        let promise = eventLoop.makePromise(of: RESPValue.self)
        enqueueOnLoop(RedisRequest(command: command, promise: promise))
        return promise.futureResult
    }

    /// `preceding` (ASKING) goes first on the same connection, or fails with it.
    private func enqueueOnLoop(_ request: RedisRequest, after preceding: RedisRequest? = nil) {
        eventLoop.assertInEventLoop()
        guard !isShutdown else {
            request.fail(RedisError.unavailable(.shutdown))
            return
        }
        // Round robin over connections that are up; else hold the command on
        // a connection whose connect attempt is in flight; else fail fast.
        let n = slots.count
        var holdSlot: Slot?
        var holdFull = false
        var backoffReason: RedisError?
        for i in 0..<n {
            let slot = slots[(nextSlot + i) % n]
            switch slot.state {
            case .ready(let channel, let handler):
                nextSlot = (nextSlot + i + 1) % n
                if channel.isActive {
                    if let preceding { handler.send(preceding) }
                    handler.send(request)
                } else {
                    request.fail(RedisError.unavailable(.connectionLost))
                }
                return
            case .connecting(let queued):
                if holdSlot == nil {
                    if queued.count < configuration.maxQueuedWhileConnecting {
                        holdSlot = slot
                    } else {
                        holdFull = true
                    }
                }
            case .backoff(let reason):
                if backoffReason == nil { backoffReason = reason }
            case .idle:
                continue
            }
        }
        if let slot = holdSlot, case .connecting(var queued) = slot.state {
            slot.state = .idle  // avoid a copy-on-write of the queue
            if let preceding { queued.append(preceding) }
            queued.append(request)
            slot.state = .connecting(queued)
        } else if holdFull {
            request.fail(RedisError.unavailable(.overloaded))
        } else {
            request.fail(backoffReason ?? RedisError.unavailable(.notConnected))
        }
    }

    // MARK: connection lifecycle

    private func connect(_ slot: Slot) {
        eventLoop.assertInEventLoop()
        guard !isShutdown else { return }
        slot.generation &+= 1
        let generation = slot.generation
        slot.state = .connecting(CircularBuffer())
        // One deadline for the whole attempt, handshake included: a server that
        // accepts TCP but never answers AUTH must not hold commands for longer.
        let connectTimeout = configuration.connectTimeout
        slot.attemptTimer = eventLoop.scheduleTask(in: connectTimeout) {
            slot.attemptTimer = nil
            self.connectFinished(
                slot, generation,
                .failure(RedisError.unavailable(.connectFailed("no connection within \(connectTimeout)"))))
        }
        let limits = configuration.limits
        let commandTimeout = configuration.commandTimeout
        let tls = configuration.tls
        let serverName = configuration.serverNameForTLS
        // The channel lives on this loop: its initializer hands its handlers over here.
        let installed = NIOLoopBoundBox<(tls: OpenSSLHandler?, commands: RedisCommandHandler?)>(
            (nil, nil), eventLoop: eventLoop)
        ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        let handler = OpenSSLHandler(client: tls, serverName: serverName)
                        try channel.pipeline.syncOperations.addHandler(handler)
                        installed.value.tls = handler
                    }
                    let commands = RedisCommandHandler(commandTimeout: commandTimeout, limits: limits)
                    try channel.pipeline.syncOperations.addHandler(commands)
                    installed.value.commands = commands
                }
            }
            .connect(host: configuration.url.host, port: configuration.url.port)
            .flatMap { channel in
                self.tlsReady(channel, installed.value.tls).flatMap { self.handshake(channel) }.flatMapThrowing {
                    guard let handler = installed.value.commands else { throw ChannelError.inappropriateOperationForState }
                    return (channel, NIOLoopBound(handler, eventLoop: channel.eventLoop))
                }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
            .whenComplete { result in
                self.connectFinished(slot, generation, result)
            }
    }

    private func connectFinished(
        _ slot: Slot, _ generation: UInt64, _ result: Result<(Channel, NIOLoopBound<RedisCommandHandler>), Error>
    ) {
        eventLoop.assertInEventLoop()
        guard slot.generation == generation, case .connecting(let queued) = slot.state else {
            // A stale attempt (abandoned at its deadline, or after shutdown).
            if case .success(let (channel, _)) = result { channel.close(promise: nil) }
            return
        }
        slot.attemptTimer?.cancel()
        slot.attemptTimer = nil
        switch result {
        case .success(let (channel, boundHandler)):
            let handler = boundHandler.value
            if isShutdown {
                slot.state = .backoff(.unavailable(.shutdown))
                channel.close(promise: nil)
                for r in queued { r.fail(RedisError.unavailable(.shutdown)) }
                return
            }
            slot.state = .ready(channel, handler)
            if slot.outageLogged {
                slot.outageLogged = false
                configuration.logger?.info("redis connection restored", metadata: ["redis": "\(target)"])
            }
            // The backoff starts over only once this connection has lasted
            // (`connectionClosed`): one that a slow server's timeouts close
            // again at once must not reconnect at the shortest delay for ever.
            slot.readySince = .now()
            channel.closeFuture.whenComplete { _ in
                self.connectionClosed(slot, channel)
            }
            for r in queued { handler.send(r) }
        case .failure(let error):
            let reason: RedisError
            if let e = error as? RedisError {
                reason = e
            } else {
                reason = .unavailable(.connectFailed("\(error)"))
            }
            // The first failure of a streak is a warning; the retries after it
            // (up to one per second per connection) only at debug level.
            if slot.attempt == 0 { slot.outageLogged = true }
            configuration.logger?.log(
                level: slot.attempt == 0 ? .warning : .debug, "redis connection failed; retrying",
                metadata: ["redis": "\(target)", "reason": "\(reason)", "attempt": "\(slot.attempt + 1)"])
            // State first: a failure callback may issue the next command at once.
            scheduleReconnect(slot, reason: reason)
            for r in queued { r.fail(reason) }
        }
    }

    private func connectionClosed(_ slot: Slot, _ channel: Channel) {
        eventLoop.assertInEventLoop()
        guard case .ready(let current, let handler) = slot.state, current === channel else { return }
        let lasted = slot.readySince.map { .now() - $0 >= Self.stableAfter } ?? false
        let firstOfStreak = lasted || !slot.unstable
        if lasted {
            slot.attempt = 0
            slot.unstable = false
        } else {
            slot.unstable = true
        }
        if !isShutdown {
            if firstOfStreak { slot.outageLogged = true }
            // Once per outage: a connection that keeps failing at once is logged at debug.
            configuration.logger?.log(
                level: firstOfStreak ? .warning : .debug, "redis connection lost; reconnecting",
                metadata: ["redis": "\(target)", "reason": "\(handler.closedError ?? .unavailable(.connectionLost))"])
        }
        scheduleReconnect(slot, reason: .unavailable(.notConnected))
    }

    /// A connection that lasted this long resets the reconnect backoff when it closes.
    static let stableAfter = TimeAmount.seconds(10)

    /// `reason` is what commands get until the next attempt starts.
    private func scheduleReconnect(_ slot: Slot, reason: RedisError) {
        slot.state = .backoff(reason)
        guard !isShutdown else { return }
        let base = configuration.backoffBase.nanoseconds
        let cap = configuration.backoffMax.nanoseconds
        let exp = base << Int64(min(slot.attempt, 20))
        let delay = min(cap, exp > 0 ? exp : cap)
        // Jitter keeps a fleet of workers from reconnecting in lockstep.
        let jittered = delay / 2 + Int64.random(in: 0...max(1, delay / 2))
        slot.attempt += 1
        slot.reconnect = eventLoop.scheduleTask(in: .nanoseconds(jittered)) {
            slot.reconnect = nil
            self.connect(slot)
        }
    }

    /// host:port and scheme for log lines (never the password).
    private var target: String { configuration.url.description }

    /// `rediss://`: the TLS handshake's outcome, so a refused certificate is
    /// reported as such (with OpenSSL's reason), not as a lost connection.
    private func tlsReady(_ channel: Channel, _ handler: OpenSSLHandler?) -> EventLoopFuture<Void> {
        guard configuration.tls != nil else { return eventLoop.makeSucceededVoidFuture() }
        guard let handler else {
            return eventLoop.makeFailedFuture(RedisError.unavailable(.connectFailed("TLS: no handshake started")))
        }
        let endpoint = "\(RedisNodeAddress(host: configuration.url.host, port: configuration.url.port))"
        // The attempt gives a server that never finishes TLS its connect timeout.
        return handler.clientHandshake(on: channel, deadline: .now() + configuration.connectTimeout)
            .flatMapErrorThrowing { error in
                throw RedisError.unavailable(.connectFailed("TLS to \(endpoint): \(error)"))
            }
    }

    /// AUTH and SELECT from the URL, then SCRIPT LOAD of every script, pipelined.
    private func handshake(_ channel: Channel) -> EventLoopFuture<Void> {
        var steps: [(String, RESPCommand)] = []
        let url = configuration.url
        if let password = url.password {
            if let user = url.username {
                steps.append(("AUTH", RESPCommand("AUTH", .string(user), .string(password))))
            } else {
                steps.append(("AUTH", RESPCommand("AUTH", .string(password))))
            }
        }
        if url.database != 0 {
            steps.append(("SELECT", RESPCommand("SELECT", .integer(Int64(url.database)))))
        }
        for script in scripts {
            steps.append(("SCRIPT LOAD", RESPCommand("SCRIPT", "LOAD", .string(script.source))))
        }
        guard !steps.isEmpty else { return eventLoop.makeSucceededVoidFuture() }
        let futures = steps.map { step -> EventLoopFuture<Void> in
            let promise = eventLoop.makePromise(of: RESPValue.self)
            channel.write(RedisRequest(command: step.1, promise: promise), promise: nil)
            let name = step.0
            return promise.futureResult.flatMapThrowing { reply in
                if case .error(let message) = reply {
                    // The server's message, never the command (it holds the password).
                    throw RedisError.unavailable(.connectFailed("\(name): \(message)"))
                }
            }
        }
        channel.flush()
        return EventLoopFuture.andAllSucceed(futures, on: eventLoop)
    }

    /// One connection of the pool; confined to the client's loop (hence unchecked).
    private final class Slot: @unchecked Sendable {
        enum State {
            case idle
            /// An attempt is in flight; the commands held until it ends.
            case connecting(CircularBuffer<RedisRequest>)
            case ready(Channel, RedisCommandHandler)
            /// Waiting for the reconnect timer; commands fail at once with this.
            case backoff(RedisError)
        }
        var state: State = .idle
        /// Failed attempts since the last success (the backoff exponent).
        var attempt = 0
        /// Identifies the attempt in flight, so a late completion of an
        /// abandoned one is ignored.
        var generation: UInt64 = 0
        var reconnect: Scheduled<Void>?
        var attemptTimer: Scheduled<Void>?
        /// When the current connection became ready.
        var readySince: NIODeadline?
        /// The last connection closed before it had lasted `stableAfter`.
        var unstable = false
        /// A warning said the connection was lost or failed: the next
        /// success says it is restored (once, not after every short-lived one).
        var outageLogged = false
    }
}
