import NIOCore

/// Why an outbound connection's TLS handshake did not complete.
public struct TLSClientHandshakeError: Error, Sendable, CustomStringConvertible {
    /// OpenSSL's reason, or what ended the handshake first.
    public let reason: String
    /// The deadline passed before the handshake finished.
    public let timedOut: Bool
    public var description: String { reason }

    public init(reason: String, timedOut: Bool) {
        self.reason = reason
        self.timedOut = timedOut
    }
}

extension OpenSSLHandler {
    /// The client handshake of this handler on `channel` (every outbound TLS
    /// connection: Redis, Apple's hosts, upstreams), which the caller installed
    /// and kept: no lookup by type. Succeeds once it completes; fails with
    /// `TLSClientHandshakeError`, closing the channel. A server that accepts
    /// TCP and never finishes TLS is given until `deadline`. Call on the
    /// channel's loop.
    public func clientHandshake(on channel: Channel, deadline: NIODeadline) -> EventLoopFuture<Void> {
        guard let done = handshakeFuture else {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(TLSClientHandshakeError(reason: "no handshake started", timedOut: false))
        }
        let expired = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
        let timer = channel.eventLoop.scheduleTask(deadline: deadline) {
            expired.value = true
            channel.close(promise: nil)
        }
        done.whenComplete { _ in timer.cancel() }
        return done.flatMapErrorThrowing { error in
            channel.close(promise: nil)
            if expired.value {
                throw TLSClientHandshakeError(reason: "the handshake did not finish in time", timedOut: true)
            }
            throw TLSClientHandshakeError(
                reason: (error as? TLSConnectionError)?.reason ?? "connection closed during the handshake", timedOut: false)
        }
    }
}
