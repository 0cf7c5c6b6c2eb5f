import NIOCore

/// Who gets a reply: a promise (public API), or a callback run on the loop
/// (the store's hot path, which saves one future per command).
enum RedisReplyTarget: Sendable {
    case promise(EventLoopPromise<RESPValue>)
    case callback(@Sendable (Result<RESPValue, any Error>) -> Void)
}

/// A command with the target its reply completes.
struct RedisRequest: Sendable {
    var command: RESPCommand
    var target: RedisReplyTarget

    init(command: RESPCommand, target: RedisReplyTarget) {
        self.command = command
        self.target = target
    }

    init(command: RESPCommand, promise: EventLoopPromise<RESPValue>) {
        self.init(command: command, target: .promise(promise))
    }

    func succeed(_ value: RESPValue) {
        target.succeed(value)
    }

    func fail(_ error: any Error) {
        target.fail(error)
    }
}

extension RedisReplyTarget {
    func succeed(_ value: RESPValue) {
        switch self {
        case .promise(let p): p.succeed(value)
        case .callback(let c): c(.success(value))
        }
    }

    func fail(_ error: any Error) {
        switch self {
        case .promise(let p): p.fail(error)
        case .callback(let c): c(.failure(error))
        }
    }
}

/// Pipelining: writes commands and completes their promises with replies in
/// FIFO order (Redis answers in order on one connection). Replies are parsed
/// here by a `RESPReader` (bounds pre-scan, then hiredis), straight from the
/// socket's bytes to the waiting command: no pipeline hop per reply. A refused
/// or malformed stream fails everything pending and closes the connection,
/// since after a framing error nothing that follows can be matched. Owns the command
/// timeout: one timer, armed for the oldest pending command. When it expires
/// every pending command fails and the connection is closed, because a late
/// reply would otherwise be matched with the wrong command.
/// Flushes asked for while replies are being read are coalesced into one at
/// `channelReadComplete`, so a burst of follow-up commands issued from reply
/// callbacks goes out in one write.
final class RedisCommandHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RedisRequest
    typealias OutboundOut = ByteBuffer

    private struct Pending {
        var target: RedisReplyTarget
        var deadline: NIODeadline
    }

    private let commandTimeout: TimeAmount
    private var pending = CircularBuffer<Pending>(initialCapacity: 64)
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private(set) var closedError: RedisError?
    private var reading = false
    private var flushDeferred = false
    private var flushScheduled = false
    /// Commands not yet handed to the channel: a burst is copied into one
    /// buffer and leaves as ONE write (one iovec, one trip down the pipeline)
    /// instead of one per command, like hiredis' own output buffer.
    private var outbound = ByteBuffer()

    private let limits: RESPLimits
    private var reader: RESPReader?

    init(commandTimeout: TimeAmount, limits: RESPLimits = .default) {
        self.commandTimeout = commandTimeout
        self.limits = limits
    }

    var pendingCount: Int { pending.count }

    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        do {
            reader = try RESPReader(limits: limits)
        } catch {
            fail(context: context, with: .unavailable(.protocolViolation("\(error)")))
        }
    }

    // MARK: outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        enqueue(context: context, unwrapOutboundIn(data), writePromise: promise)
    }

    /// The client's direct path (on the loop): skips the pipeline traversal
    /// and the boxing of `RedisRequest` into `NIOAny`; only the encoded bytes
    /// travel down the pipeline. Flushed like `flush(context:)`.
    func send(_ request: RedisRequest) {
        guard let context else {
            request.fail(closedError ?? RedisError.unavailable(.connectionLost))
            return
        }
        enqueue(context: context, request, writePromise: nil)
        flush(context: context)
    }

    private func enqueue(context: ChannelHandlerContext, _ request: RedisRequest, writePromise: EventLoopPromise<Void>?) {
        if let closedError {
            request.fail(closedError)
            writePromise?.fail(closedError)
            return
        }
        let deadline = context.eventLoop.now + commandTimeout
        pending.append(Pending(target: request.target, deadline: deadline))
        if timer == nil { armTimer(context: context, at: deadline) }
        if let writePromise {
            // Someone waits for this very write: keep the order, write it alone.
            writeOutbound(context: context)
            context.write(wrapOutboundOut(request.command.bytes), promise: writePromise)
        } else {
            var bytes = request.command.bytes
            outbound.writeBuffer(&bytes)
        }
    }

    private func writeOutbound(context: ChannelHandlerContext) {
        guard outbound.readableBytes > 0 else { return }
        context.write(wrapOutboundOut(outbound), promise: nil)
        outbound.clear()
    }

    private func flushNow(context: ChannelHandlerContext) {
        if outbound.readableBytes > 0 {
            context.write(wrapOutboundOut(outbound), promise: nil)
            context.flush()
            // Cleared after the flush: once the socket has taken the bytes
            // (the usual case) the channel has let go of the storage and the
            // next burst reuses it; otherwise this copies on write.
            outbound.clear()
        } else {
            context.flush()
        }
    }

    /// Flushes are consolidated: during a read burst they wait for
    /// `channelReadComplete`; otherwise for the end of the current event-loop
    /// tick. Commands issued together (many requests handled in one tick,
    /// follow-ups from reply callbacks) then leave in one write, and Redis
    /// reads them as one batch instead of many small ones.
    func flush(context: ChannelHandlerContext) {
        if reading {
            flushDeferred = true
            return
        }
        guard !flushScheduled else { return }
        flushScheduled = true
        let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let loopBoundSelf = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let handler = loopBoundSelf.value
            guard handler.flushScheduled else { return }
            handler.flushScheduled = false
            handler.flushNow(context: loopBoundContext.value)
        }
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard closedError == nil, let reader else { return }
        let buffer = unwrapInboundIn(data)
        reading = true
        do {
            try buffer.withUnsafeReadableBytes { bytes throws(RESPDecodingError) in try reader.feed(bytes) }
            var demoted = false
            while closedError == nil, let value = try reader.next() {
                guard let head = pending.popFirst() else {
                    // A reply nobody asked for: the stream is out of sync.
                    fail(context: context, with: .unavailable(.protocolViolation("unsolicited reply")))
                    return
                }
                if case .error(let message) = value, Self.meansNotPrimary(message) { demoted = true }
                head.target.succeed(value)
            }
            // The server was demoted (a failover behind a DNS name or a
            // virtual IP that keeps old connections): a new connection
            // reaches the new primary, this one never would.
            if demoted { fail(context: context, with: .unavailable(.notPrimary)) }
        } catch {
            fail(context: context, with: .unavailable(.protocolViolation("\(error)")))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        if flushDeferred || flushScheduled {
            flushDeferred = false
            flushScheduled = false
            flushNow(context: context)
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(.unavailable(.connectionLost))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        fail(context: context, with: (error as? RedisError) ?? .unavailable(.connectionLost))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failAll(.unavailable(.connectionLost))
        self.context = nil
        reader = nil
    }

    /// Error replies that say this server cannot take writes any more.
    static func meansNotPrimary(_ message: String) -> Bool {
        message.hasPrefix("READONLY") || message.hasPrefix("MASTERDOWN")
    }

    // MARK: failure

    private func fail(context: ChannelHandlerContext, with error: RedisError) {
        failAll(error)
        context.close(promise: nil)
    }

    private func failAll(_ error: RedisError) {
        if closedError == nil { closedError = error }
        outbound.clear()
        timer?.cancel()
        timer = nil
        timerDeadline = nil
        while let p = pending.popFirst() {
            p.target.fail(error)
        }
    }

    // MARK: timeout

    private func armTimer(context: ChannelHandlerContext, at deadline: NIODeadline) {
        timerDeadline = deadline
        let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let loopBoundSelf = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            loopBoundSelf.value.timerFired(context: loopBoundContext.value)
        }
    }

    private func timerFired(context: ChannelHandlerContext) {
        timer = nil
        timerDeadline = nil
        guard let head = pending.first else { return }
        if head.deadline <= context.eventLoop.now {
            fail(context: context, with: .unavailable(.timeout))
        } else {
            armTimer(context: context, at: head.deadline)
        }
    }
}
