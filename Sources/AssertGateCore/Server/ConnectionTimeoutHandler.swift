import NIOCore

/// Closes a client connection that never gets going or goes quiet, so idle or
/// stalled peers cannot hold file descriptors forever:
/// - not established (TLS handshake done and the front end chosen, see
///   `markEstablished`) within `handshakeTimeout`: a TCP connection that sends
///   nothing, a handshake that stalls;
/// - no byte read and no write issued for `idleTimeout` afterwards: a
///   keep-alive connection left open, or a peer that stopped reading (our
///   writes, close_notify included, never complete and nothing new happens).
/// It sits first in the pipeline (next to the socket) and passes everything
/// through untouched; activity is a timestamp store, the timer is one task
/// re-armed only when it fires.
final class ConnectionTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer

    private let handshakeTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private var established = false
    private var lastActivity = NIODeadline.uptimeNanoseconds(0)
    private var timer: Scheduled<Void>?

    init(handshakeTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.handshakeTimeout = handshakeTimeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        lastActivity = context.eventLoop.now
        arm(context: context, at: lastActivity + handshakeTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    /// The connection is up (called by the front end once chosen): from now
    /// on only inactivity closes it.
    func markEstablished(context: ChannelHandlerContext) {
        guard !established else { return }
        established = true
        lastActivity = context.eventLoop.now
        timer?.cancel()
        arm(context: context, at: lastActivity + idleTimeout)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastActivity = context.eventLoop.now
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        lastActivity = context.eventLoop.now
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func arm(context: ChannelHandlerContext, at deadline: NIODeadline) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.fire(context: context)
        }
    }

    private func fire(context: ChannelHandlerContext) {
        timer = nil
        guard context.channel.isActive else { return }
        guard established else {
            context.close(promise: nil)
            return
        }
        let due = lastActivity + idleTimeout
        if due <= context.eventLoop.now {
            context.close(promise: nil)
        } else {
            arm(context: context, at: due)
        }
    }
}
