import NIOCore
import NIOEmbedded

/// Models NIOPosix's socket read loop on top of `EmbeddedChannel`, which has
/// none: bytes that "arrive" wait in a receive queue and reach the pipeline
/// only while a `read()` is outstanding; each socket read clears it, fires
/// `channelRead` + `channelReadComplete`, and with autoRead on re-issues
/// `read()` only if nothing in the pipeline already did (as
/// `BaseSocketChannel.readable0` / `readIfNeeded0` do). A handler that
/// swallows a read therefore stalls here exactly as on a real socket.
///
/// Optionally turns the channel unwritable once this many ciphertext bytes
/// have been written, like a high watermark being crossed.
final class SimulatedSocket: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let autoRead: Bool
    private(set) var readPending = false
    private var receiveQueue: [ByteBuffer] = []
    private(set) var socketReads = 0
    var unwritableAfterBytes: Int?
    private(set) var bytesWritten = 0
    private weak var channel: EmbeddedChannel?

    init(autoRead: Bool) {
        self.autoRead = autoRead
    }

    var queuedBytes: Int { self.receiveQueue.reduce(0) { $0 + $1.readableBytes } }

    func read(context: ChannelHandlerContext) {
        self.readPending = true
        context.read()
    }

    /// Every close that reached the socket, in order. A half close (which
    /// `EmbeddedChannel` does not support) is recorded and succeeds here.
    private(set) var closes: [CloseMode] = []

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        self.closes.append(mode)
        if mode == .output {
            promise?.succeed()
        } else {
            context.close(mode: mode, promise: promise)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.bytesWritten += self.unwrapOutboundIn(data).readableBytes
        context.write(data, promise: promise)
        if let limit = self.unwritableAfterBytes, self.bytesWritten >= limit, let channel = self.channel,
            channel.isWritable
        {
            channel.isWritable = false
            channel.pipeline.fireChannelWritabilityChanged()
        }
    }

    /// Adds itself at the head of the pipeline and activates the channel,
    /// issuing autoRead's first read the way `becomeActive0` does.
    func install(on channel: EmbeddedChannel) async throws {
        self.channel = channel
        try channel.pipeline.syncOperations.addHandler(self, position: .first)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).get()
        self.readIfNeeded()
    }

    /// Bytes arrive from the peer; they are read while a read is pending.
    func arrive(_ buffer: ByteBuffer) {
        if buffer.readableBytes > 0 {
            self.receiveQueue.append(buffer)
        }
        self.pump()
    }

    func pump() {
        guard let channel = self.channel else { return }
        while self.readPending && channel.isActive && !self.receiveQueue.isEmpty {
            self.readPending = false
            self.socketReads += 1
            channel.pipeline.fireChannelRead(self.receiveQueue.removeFirst())
            channel.pipeline.fireChannelReadComplete()
            self.readIfNeeded()
        }
    }

    private func readIfNeeded() {
        if self.autoRead && !self.readPending, let channel = self.channel, channel.isActive {
            channel.read()
        }
    }

    /// The peer drained the socket: writable again.
    func becomeWritable() {
        guard let channel = self.channel else { return }
        self.unwritableAfterBytes = nil
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
    }
}
