import NIOCore

/// Closes a client connection that never gets going or goes quiet, so idle or
/// stalled peers cannot hold file descriptors forever:
/// - not established within `handshakeTimeout` (TLS handshake done and the
///   client shown its protocol: HTTP/2's preface with its SETTINGS, or the
///   first byte of an HTTP/1.1 request; see `markEstablished`): a TCP
///   connection that sends nothing, a handshake that stalls, a handshake
///   followed by silence;
/// - no byte read and no write issued for `idleTimeout` afterwards: a
///   keep-alive connection left open, or a peer that stopped reading (our
///   writes, close_notify included, never complete and nothing new happens).
/// - a request head not complete within `headerTimeout` of its start: a
///   client trickling a header byte at a time, which resets the idle clock
///   forever (slowloris). HTTP/1.1 says when it waits for a head
///   (`awaitRequestHead`; the clock starts at its first byte), HTTP/2 when a
///   header block begins (`requestHeadStarted`, HEADERS then CONTINUATIONs).
/// It sits first in the pipeline (next to the socket) and passes everything
/// through untouched; activity is a timestamp store, the timer is one task
/// re-armed only when it fires or an earlier deadline appears. The handlers
/// that call it are given it when they are made (`ProtocolDetector` passes it
/// to the front end it installs), not found in the pipeline by type.
final class ConnectionTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer

    private let handshakeTimeout: TimeAmount
    private var idleTimeout: TimeAmount
    private var headerTimeout: TimeAmount
    /// The listener's idle and header timeouts as they are now: a reload
    /// changes them for connections already open too (read when the
    /// connection is established and whenever the timer fires), so a
    /// connection opened before a reload that lengthened the upstream's
    /// response timeout is not cut by the shorter idle timeout of before.
    private let current: (@Sendable () -> (idle: TimeAmount, header: TimeAmount))?
    private var established = false
    /// The HTTP/1.1 front end is in (ALPN chose it) but no byte of a request
    /// has come: the next read, or the first request head, establishes the
    /// connection (`establishIfWaiting`).
    private var establishOnRead = false
    /// The idle close is under way (quiesce sent); the next firing ends it.
    private var closingIdle = false
    /// A quiesce went down the pipeline (the idle close's or a shutdown's):
    /// NIO's HTTP/1.1 pipeline handler takes only one.
    private var quiesced = false
    private var lastActivity = NIODeadline.uptimeNanoseconds(0)
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// The front end waits for a request head (HTTP/1.1 between requests).
    private var awaitingHead = false
    /// When the request head in progress started, if one is.
    private var headStartedAt: NIODeadline?
    /// Set while the handler is in a pipeline (the front ends mark it
    /// established and run the header clock from their own events).
    private var context: ChannelHandlerContext?

    init(
        handshakeTimeout: TimeAmount, idleTimeout: TimeAmount, headerTimeout: TimeAmount = .seconds(30),
        current: (@Sendable () -> (idle: TimeAmount, header: TimeAmount))? = nil
    ) {
        self.handshakeTimeout = handshakeTimeout
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.current = current
    }

    private func refreshTimeouts() {
        guard let current else { return }
        (idleTimeout, headerTimeout) = current()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        lastActivity = context.eventLoop.now
        arm(context: context, at: lastActivity + handshakeTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
        self.context = nil
    }

    /// The connection is up (called once the front end is chosen): from now
    /// on only inactivity closes it.
    func markEstablished() {
        guard !established, let context else { return }
        established = true
        lastActivity = context.eventLoop.now
        refreshTimeouts()
        disarm()
        arm(context: context, at: establishedDeadline)
    }

    /// The HTTP/1.1 front end was chosen before any request byte came (by
    /// ALPN): the handshake deadline runs until the next read, or the first
    /// request head if it came with the handshake's last read, so a client
    /// that completes a TLS handshake and says nothing is closed at
    /// `handshakeTimeout`, not held for `idleTimeout`.
    func establishAtFirstByte() {
        guard !established else { return }
        establishOnRead = true
    }

    private func establishIfWaiting() {
        guard establishOnRead else { return }
        establishOnRead = false
        markEstablished()
    }

    /// When an established connection is due to close: idle, or a request
    /// head that has been arriving for too long, whichever comes first.
    private var establishedDeadline: NIODeadline {
        let idle = lastActivity + idleTimeout
        guard let started = headStartedAt else { return idle }
        return min(idle, started + headerTimeout)
    }

    /// The HTTP/1.1 front end waits for the next request head: its first byte
    /// starts the header clock.
    func awaitRequestHead() {
        awaitingHead = true
        headStartedAt = nil
    }

    /// A request head has begun (HTTP/2: a HEADERS frame): the header clock
    /// starts now unless one is already running.
    func requestHeadStarted() {
        guard headStartedAt == nil, let context else { return }
        startHeaderClock(context: context, at: context.eventLoop.now)
    }

    /// The head is complete: no header clock until the next head starts.
    /// A first HTTP/1.1 head establishes the connection: over TLS it can
    /// come in the very read that finished the handshake (the client's
    /// Finished and its request together), which this handler saw as
    /// ciphertext before the front end existed.
    func requestHeadReceived() {
        establishIfWaiting()
        awaitingHead = false
        headStartedAt = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        establishIfWaiting()
        lastActivity = context.eventLoop.now
        if awaitingHead, headStartedAt == nil {
            startHeaderClock(context: context, at: lastActivity)
        }
        context.fireChannelRead(data)
    }

    private func startHeaderClock(context: ChannelHandlerContext, at now: NIODeadline) {
        headStartedAt = now
        let due = now + headerTimeout
        // One timer: move it earlier if the header deadline comes first.
        if timerDeadline.map({ $0 > due }) ?? true {
            disarm()
            arm(context: context, at: due)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        lastActivity = context.eventLoop.now
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }

    private func arm(context: ChannelHandlerContext, at deadline: NIODeadline) {
        timerDeadline = deadline
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.fire(context: context)
        }
    }

    private func fire(context: ChannelHandlerContext) {
        timer = nil
        timerDeadline = nil
        guard context.channel.isActive else { return }
        guard established, !closingIdle else {
            // Before the protocol is known, or after the idle close's grace: at once.
            context.close(promise: nil)
            return
        }
        refreshTimeouts()
        let now = context.eventLoop.now
        if let started = headStartedAt, started + headerTimeout <= now {
            // A head dragged out (slowloris): no courtesy.
            context.close(promise: nil)
        } else if lastActivity + idleTimeout <= now {
            // Idle: closed as a shutdown closes it, through the front end and
            // the TLS handler (GOAWAY with the last stream on HTTP/2,
            // close_notify over TLS), so a client can tell it from a cut; a
            // peer that does not take them is closed after a short grace.
            closingIdle = true
            arm(context: context, at: now + Self.idleCloseGrace)
            if !quiesced {
                quiesced = true
                context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
            }
        } else {
            arm(context: context, at: establishedDeadline)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            if quiesced { return }
            quiesced = true
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// How long an idle connection asked to close (GOAWAY, close_notify) has
    /// before it is closed at the socket.
    static let idleCloseGrace = TimeAmount.seconds(2)
}
