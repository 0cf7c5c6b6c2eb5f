import Logging
import NIOCore

/// TLS for one connection with OpenSSL memory BIOs: the server side of an
/// accepted client connection, or the client side of an outbound one (Redis
/// over `rediss://`, where `handshakeFuture` tells the caller when the
/// connection is usable or why it never will be).
///
/// Inbound: ciphertext is fed to OpenSSL; after the handshake a
/// `TLSHandshakeCompleted` user event is fired, then decrypted plaintext is
/// delivered only when the next handler asked for it with `read()` (so
/// `autoRead = false` is honoured; reads the handshake needs are issued here).
///
/// Outbound: plaintext writes are queued until `flush()`, then encrypted and
/// emitted as one ciphertext buffer per flush. Large flushes are encrypted in
/// slices and paused while the channel is not writable, so a 16 MiB body never
/// sits in memory twice; each write promise completes when the ciphertext
/// holding its last byte has been written to the socket.
///
/// Close sends close_notify and closes once it is written; a peer
/// close_notify closes the channel. Handshake or record errors send OpenSSL's
/// alert, are logged once at debug level and close the connection.
public final class OpenSSLHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private enum State {
        case handshaking
        case active
        /// close_notify queued, waiting for it to reach the socket.
        case closing
        case closed
    }

    private struct PendingWrite {
        var data: ByteBuffer
        var promise: EventLoopPromise<Void>?
    }

    /// Plaintext handed to one `SSL_write` (one full record): bounds each
    /// step of a huge write.
    static let plaintextSliceSize = 16 * 1024
    /// Ciphertext emitted before the end of a flush once this much is pending.
    /// The write BIO's buffer grows to the most it ever held and keeps that
    /// size for the connection's life (OpenSSL's memory BIO never shrinks):
    /// at 256 KiB, every TLS connection that had once sent a large response
    /// kept ~350 KiB while idle; at 32 KiB the channel gets a few more, smaller
    /// buffers in the same writev.
    static let ciphertextEmitThreshold = 32 * 1024
    /// Capacity of each inbound plaintext buffer: one full TLS record.
    static let plaintextBufferSize = TLSConnection.maximumRecordSize

    private enum Role {
        case server(TLSServerContext)
        case client(TLSClientContext, serverName: String)
    }

    private let role: Role
    private let logger: Logger
    private var connection: TLSConnection?
    private var state: State = .handshaking
    /// Client role: completed when the handshake succeeds or fails.
    private var handshakePromise: EventLoopPromise<Void>?
    private var clientHelloSent = false

    private var pendingWrites = CircularBuffer<PendingWrite>()
    /// How many entries at the front of `pendingWrites` have been flushed.
    private var flushedWriteCount = 0
    private var encrypting = false
    private var encryptAgain = false

    private var plaintext = CircularBuffer<ByteBuffer>()
    /// The next handler called `read()` and has not yet received a batch.
    private var readRequested = false
    private var delivering = false

    private var closeFuture: EventLoopFuture<Void>?
    /// The mode of the close that sent our close_notify.
    private var closingMode: CloseMode?
    /// A peer that does not read would hold our close_notify (and the socket)
    /// forever: after this long the socket is closed without it.
    private static let closeNotifyTimeout: TimeAmount = .seconds(2)

    /// True once the peer's close_notify arrived: a close without it may be
    /// a truncation (RFC 8446 §6.1), which a body delimited by the close
    /// must not take for its end.
    public private(set) var receivedCloseNotify = false
    /// The protocol ALPN settled on, once the handshake is done (nil: none).
    public private(set) var negotiatedALPN: String?
    /// A close requested while `encryptFlushedWrites` was running (e.g. from
    /// a write promise completed by its flush); performed when it returns.
    private var deferredClose: (mode: CloseMode, promise: EventLoopPromise<Void>?)?
    private var loggedFailure = false

    /// Bytes OpenSSL may still write in answer to the peer's control
    /// messages (a TLS 1.3 KeyUpdate asking for one back, a TLS 1.2
    /// renegotiation refused with an alert): OpenSSL answers each, with no
    /// limit, so a peer that sends them and reads nothing would pile the
    /// answers up here and hold the loop (as an HTTP/2 PING flood would
    /// without its budget). `controlReplyBurst`, refilled at
    /// `controlReplyPerSecond`; past it the connection is closed.
    private var controlReplyAllowance = OpenSSLHandler.controlReplyBurst
    private var controlReplyChargedAt: NIODeadline?
    /// About 600 KeyUpdate answers at once (27 bytes each), 40 a second after.
    static let controlReplyBurst = 16 * 1024
    static let controlReplyPerSecond = 1024

    /// Server side of an accepted connection.
    public init(context: TLSServerContext, logger: Logger = Logger(label: "assertgate.tls")) {
        self.role = .server(context)
        self.logger = logger
    }

    /// Client side of an outbound connection; the server's certificate must
    /// verify against `context`'s trust and match `serverName`.
    public init(client context: TLSClientContext, serverName: String, logger: Logger = Logger(label: "assertgate.tls")) {
        self.role = .client(context, serverName: serverName)
        self.logger = logger
    }

    /// Client role: succeeds once the handshake is done (writes made before
    /// are sent then), fails with `TLSConnectionError` naming OpenSSL's
    /// reason, or with `ChannelError.ioOnClosedChannel` if the connection
    /// closed first. Nil in the server role and before the handler is added.
    private(set) var handshakeFuture: EventLoopFuture<Void>?

    // MARK: lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        let made: TLSConnection?
        switch self.role {
        case .server(let server):
            made = TLSConnection(context: server)
        case .client(let client, let serverName):
            let promise = context.eventLoop.makePromise(of: Void.self)
            self.handshakePromise = promise
            self.handshakeFuture = promise.futureResult
            made = TLSConnection(client: client, serverName: serverName)
        }
        guard let connection = made else {
            self.fail(context: context, reason: "SSL_new failed or the server name was refused")
            return
        }
        self.connection = connection
        if context.channel.isActive {
            self.startHandshake(context: context)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.failPendingWrites(ChannelError.ioOnClosedChannel)
        self.plaintext.removeAll()
        self.completeHandshake(.failure(ChannelError.ioOnClosedChannel))
    }

    public func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        if self.state == .handshaking {
            self.startHandshake(context: context)
        }
    }

    /// A client speaks first (ClientHello); either side then needs bytes
    /// even when the application reads lazily.
    private func startHandshake(context: ChannelHandlerContext) {
        if case .client = self.role, !self.clientHelloSent, let connection = self.connection {
            self.clientHelloSent = true
            self.advanceHandshake(context: context, connection: connection)
            guard self.state == .handshaking else { return }
        }
        context.read()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        // Bytes decrypted ahead of a read() are the peer's last words: hand
        // them over before the close, as a cleartext channel would have;
        // not after a close of our own, when nobody is listening any more.
        if self.state == .active && !self.plaintext.isEmpty && !self.delivering {
            self.deliverPlaintext(context: context)
        }
        self.state = .closed
        self.failPendingWrites(ChannelError.ioOnClosedChannel)
        self.plaintext.removeAll()
        self.completeHandshake(.failure(ChannelError.ioOnClosedChannel))
        context.fireChannelInactive()
    }

    private func completeHandshake(_ result: Result<Void, any Error>) {
        guard let promise = self.handshakePromise else { return }
        self.handshakePromise = nil
        promise.completeWith(result)
    }

    // MARK: inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let connection = self.connection else { return }
        switch self.state {
        case .handshaking:
            guard connection.feedCiphertext(self.unwrapInboundIn(data)) else {
                self.fail(context: context, reason: "cannot buffer ciphertext (BIO_write failed)")
                return
            }
            self.advanceHandshake(context: context, connection: connection)
        case .active:
            guard connection.feedCiphertext(self.unwrapInboundIn(data)) else {
                self.fail(context: context, reason: "cannot buffer ciphertext (BIO_write failed)")
                return
            }
            self.decrypt(context: context, connection: connection)
        case .closing, .closed:
            // After close_notify nothing the peer sends matters.
            break
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        if self.readRequested && !self.plaintext.isEmpty && !self.delivering {
            self.deliverPlaintext(context: context)
        }
        // Ask for more ciphertext if the handshake is unfinished or the
        // application's read produced no complete record yet.
        switch self.state {
        case .handshaking:
            context.read()
        case .active where self.readRequested && self.plaintext.isEmpty:
            context.read()
        default:
            break
        }
    }

    public func read(context: ChannelHandlerContext) {
        self.readRequested = true
        if !self.plaintext.isEmpty {
            // Inside a delivery loop the caller re-checks the request once
            // the batch is out (see `channelReadComplete`).
            if self.delivering { return }
            self.deliverPlaintext(context: context)
        }
        // Forward the read even when buffered plaintext just satisfied it.
        // With autoRead on this read() comes from the channel itself, which
        // re-arms only after socket data arrives: swallowing it leaves no
        // socket read outstanding and the connection stalls for good (seen
        // when the client's Finished and its first records share a read).
        // With autoRead off this reads ahead at most one socket read, which
        // stays buffered until the next read().
        context.read()
    }

    private func advanceHandshake(context: ChannelHandlerContext, connection: TLSConnection) {
        switch connection.doHandshake() {
        case .wantsMoreData:
            self.emitCiphertext(context: context, connection: connection, promise: nil)
            context.flush()
        case .failed(let reason):
            self.fail(context: context, reason: reason)
        case .completed:
            self.state = .active
            self.emitCiphertext(context: context, connection: connection, promise: nil)
            context.flush()
            self.negotiatedALPN = connection.negotiatedALPN
            self.completeHandshake(.success(()))
            context.fireUserInboundEventTriggered(TLSHandshakeCompleted(negotiatedALPN: connection.negotiatedALPN))
            // The event handler may have closed the channel.
            guard self.state == .active else { return }
            // Application data may have arrived with the client's Finished.
            self.decrypt(context: context, connection: connection)
            if self.state == .active && self.flushedWriteCount > 0 {
                self.encryptFlushedWrites(context: context, honourWritability: true)
            }
        }
    }

    /// Decrypts every complete record in the read BIO into `plaintext`.
    /// Small records share a buffer; a full buffer is queued and a new one
    /// started, so decrypted bytes are never copied again.
    private func decrypt(context: ChannelHandlerContext, connection: TLSConnection) {
        var buffer = context.channel.allocator.buffer(capacity: Self.plaintextBufferSize)
        var peerClosed = false
        // Nothing of ours is encrypted while reading: what the write BIO gains
        // here is OpenSSL's answers to the peer's control messages.
        let ciphertextBefore = connection.pendingCiphertextBytes
        loop: while true {
            if buffer.writableBytes == 0 {
                self.plaintext.append(buffer)
                buffer = context.channel.allocator.buffer(capacity: Self.plaintextBufferSize)
            }
            switch connection.readPlaintext(into: &buffer) {
            case .bytes:
                continue
            case .wantsMoreData:
                break loop
            case .peerClosed:
                peerClosed = true
                self.receivedCloseNotify = true
                break loop
            case .failed(let reason):
                self.fail(context: context, reason: reason)
                return
            }
        }
        if buffer.readableBytes > 0 {
            self.plaintext.append(buffer)
        }
        // Reading can produce records of our own (e.g. a TLS 1.3 KeyUpdate reply).
        let replies = connection.pendingCiphertextBytes - ciphertextBefore
        if replies > 0, !self.chargeControlReplies(replies) {
            self.fail(context: context, reason: "too many TLS control messages to answer (KeyUpdate, renegotiation)")
            return
        }
        if connection.pendingCiphertextBytes > 0 {
            self.emitCiphertext(context: context, connection: connection, promise: nil)
            context.flush()
        }
        if peerClosed {
            // Hand over what the peer sent before its close_notify, then close.
            if !self.plaintext.isEmpty && !self.delivering {
                self.deliverPlaintext(context: context)
            }
            context.channel.close(promise: nil)
        }
    }

    /// Takes `bytes` from the allowance (refilled for the time since the
    /// last charge); false when it is spent.
    private func chargeControlReplies(_ bytes: Int) -> Bool {
        let now = NIODeadline.now()
        if let last = self.controlReplyChargedAt {
            let refill = Int((now - last).nanoseconds / 1_000_000) * Self.controlReplyPerSecond / 1000
            self.controlReplyAllowance = min(Self.controlReplyBurst, self.controlReplyAllowance + refill)
        }
        self.controlReplyChargedAt = now
        self.controlReplyAllowance -= bytes
        return self.controlReplyAllowance >= 0
    }

    private func deliverPlaintext(context: ChannelHandlerContext) {
        self.readRequested = false
        self.delivering = true
        // A handler downstream may close the channel mid-batch; stop then.
        while self.state != .closed, let buffer = self.plaintext.popFirst() {
            context.fireChannelRead(self.wrapInboundOut(buffer))
        }
        self.delivering = false
        context.fireChannelReadComplete()
    }

    // MARK: outbound

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.state {
        case .handshaking, .active:
            self.pendingWrites.append(PendingWrite(data: self.unwrapOutboundIn(data), promise: promise))
        case .closing, .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        self.flushedWriteCount = self.pendingWrites.count
        // Before the handshake completes the flush is remembered and
        // performed right after it.
        if self.state == .active {
            self.encryptFlushedWrites(context: context, honourWritability: true)
        }
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable && self.state == .active && self.flushedWriteCount > 0 {
            self.encryptFlushedWrites(context: context, honourWritability: true)
        }
        context.fireChannelWritabilityChanged()
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .input {
            context.close(mode: mode, promise: promise)
            return
        }
        switch self.state {
        case .handshaking:
            self.state = .closed
            self.failPendingWrites(ChannelError.ioOnClosedChannel)
            context.close(mode: mode, promise: promise)
        case .active:
            guard let connection = self.connection else {
                self.state = .closed
                context.close(mode: mode, promise: promise)
                return
            }
            if self.encrypting {
                // The running pass may have stopped at unwritability with
                // flushed writes left; closing now would fail them instead
                // of sending them before close_notify.
                if var deferred = self.deferredClose {
                    if let promise {
                        if let first = deferred.promise {
                            first.futureResult.cascade(to: promise)
                        } else {
                            deferred.promise = promise
                        }
                    }
                    self.deferredClose = deferred
                } else {
                    self.deferredClose = (mode, promise)
                }
                return
            }
            // Everything the application flushed goes out before close_notify.
            self.encryptFlushedWrites(context: context, honourWritability: false)
            guard self.state == .active else {
                // Encryption failed and already closed: no close_notify after a fatal error.
                context.close(mode: mode, promise: promise)
                return
            }
            self.state = .closing
            self.closingMode = mode
            self.failPendingWrites(ChannelError.ioOnClosedChannel)
            connection.shutdown()
            let closeNotifyWritten = context.eventLoop.makePromise(of: Void.self)
            self.emitCiphertext(context: context, connection: connection, promise: closeNotifyWritten)
            context.flush()
            let closed = context.eventLoop.makePromise(of: Void.self)
            self.closeFuture = closed.futureResult
            if let promise {
                closed.futureResult.cascade(to: promise)
            }
            // Closing at once would drop ciphertext still queued in the channel;
            // waiting for ever would let a peer that stopped reading keep it.
            var done = false
            let finish = {
                guard !done else { return }
                done = true
                context.close(mode: mode, promise: closed)
            }
            let deadline = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeNotifyTimeout) { finish() }
            closeNotifyWritten.futureResult.assumeIsolated().whenComplete { _ in
                deadline.cancel()
                finish()
            }
        case .closing:
            if mode == .all && self.closingMode == .output {
                // A half close (HTTP/1.1 linger) then a full one (its timer):
                // the full one must reach the socket, not wait on the first.
                self.closingMode = .all
                context.close(mode: .all, promise: promise)
            } else if let closeFuture = self.closeFuture {
                if let promise {
                    closeFuture.cascade(to: promise)
                }
            } else {
                context.close(mode: mode, promise: promise)
            }
        case .closed:
            context.close(mode: mode, promise: promise)
        }
    }

    /// Encrypts flushed writes in slices, emitting ciphertext whenever enough
    /// has accumulated; stops while the channel is not writable (resumed by
    /// `channelWritabilityChanged`) unless closing.
    private func encryptFlushedWrites(context: ChannelHandlerContext, honourWritability: Bool) {
        guard let connection = self.connection else { return }
        guard !self.encrypting else {
            // Re-entered, typically from `flush()` below draining the socket
            // and firing writability: let the running call do another pass.
            self.encryptAgain = true
            return
        }
        self.encrypting = true
        repeat {
            self.encryptAgain = false
            self.encryptionPass(context: context, connection: connection, honourWritability: honourWritability)
        } while self.encryptAgain && self.flushedWriteCount > 0 && self.state == .active
            && context.channel.isWritable
        self.encrypting = false
        if let deferred = self.deferredClose {
            self.deferredClose = nil
            self.close(context: context, mode: deferred.mode, promise: deferred.promise)
        }
    }

    private func encryptionPass(context: ChannelHandlerContext, connection: TLSConnection, honourWritability: Bool) {
        // Promises of writes fully encrypted since the last emit, chained
        // onto the first so the whole group completes with one channel write.
        var promise: EventLoopPromise<Void>?
        while self.flushedWriteCount > 0, let head = self.pendingWrites.first {
            if honourWritability && !context.channel.isWritable {
                break
            }
            let sliceLength = min(head.data.readableBytes, Self.plaintextSliceSize)
            let step = head.data.withUnsafeReadableBytes { bytes in
                connection.writePlaintext(UnsafeRawBufferPointer(rebasing: bytes.prefix(sliceLength)))
            }
            if case .failed(let reason) = step {
                promise?.fail(TLSConnectionError(reason: reason))
                self.fail(context: context, reason: reason)
                return
            }
            self.pendingWrites[self.pendingWrites.startIndex].data.moveReaderIndex(forwardBy: sliceLength)
            if self.pendingWrites[self.pendingWrites.startIndex].data.readableBytes == 0 {
                let done = self.pendingWrites.removeFirst()
                self.flushedWriteCount -= 1
                if let next = done.promise {
                    if let promise {
                        promise.futureResult.cascade(to: next)
                    } else {
                        promise = next
                    }
                }
            }
            if connection.pendingCiphertextBytes >= Self.ciphertextEmitThreshold {
                self.emitCiphertext(context: context, connection: connection, promise: promise)
                promise = nil
            }
        }
        self.emitCiphertext(context: context, connection: connection, promise: promise)
        context.flush()
    }

    /// Writes (without flushing) everything in the write BIO as one buffer.
    private func emitCiphertext(
        context: ChannelHandlerContext,
        connection: TLSConnection,
        promise: EventLoopPromise<Void>?
    ) {
        let pending = connection.pendingCiphertextBytes
        if pending == 0 && promise == nil { return }
        var buffer = context.channel.allocator.buffer(capacity: pending)
        connection.drainCiphertext(into: &buffer)
        context.write(self.wrapOutboundOut(buffer), promise: promise)
    }

    // MARK: failure

    private func fail(context: ChannelHandlerContext, reason: String) {
        switch self.state {
        case .closed:
            return
        case .handshaking, .active, .closing:
            break
        }
        if !self.loggedFailure {
            self.loggedFailure = true
            self.logger.debug(
                "TLS connection closed on error",
                metadata: [
                    "reason": "\(reason)",
                    "peer": "\(context.channel.remoteAddress.map { "\($0)" } ?? "unknown")",
                ])
        }
        self.state = .closed
        self.failPendingWrites(TLSConnectionError(reason: reason))
        self.completeHandshake(.failure(TLSConnectionError(reason: reason)))
        self.plaintext.removeAll()
        // Send OpenSSL's alert, if it produced one, so the client learns why.
        if let connection = self.connection, connection.pendingCiphertextBytes > 0 {
            self.emitCiphertext(context: context, connection: connection, promise: nil)
            context.flush()
        }
        context.close(promise: nil)
    }

    private func failPendingWrites(_ error: any Error) {
        self.flushedWriteCount = 0
        while let write = self.pendingWrites.popFirst() {
            write.promise?.fail(error)
        }
    }
}

@available(*, unavailable)
extension OpenSSLHandler: Sendable {}
