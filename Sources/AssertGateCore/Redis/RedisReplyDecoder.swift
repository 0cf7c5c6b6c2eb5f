import NIOCore

/// Inbound bytes → `RESPValue`s. Bytes go through the limit pre-scan and then
/// into a hiredis reader that does the parsing; every complete reply is
/// converted to Swift and passed on. A refused or malformed stream closes the
/// channel: after a framing error nothing that follows can be trusted.
final class RedisReplyDecoder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = RESPValue

    private let limits: RESPLimits
    private var reader: RESPReader?
    private var failed = false

    init(limits: RESPLimits = .default) {
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        do {
            reader = try RESPReader(limits: limits)
        } catch {
            failed = true
            context.fireErrorCaught(error)
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        reader = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed, let reader else { return }
        let buffer = unwrapInboundIn(data)
        do {
            try buffer.withUnsafeReadableBytes { bytes throws(RESPDecodingError) in
                try reader.feed(bytes)
            }
            while let value = try reader.next() {
                context.fireChannelRead(wrapInboundOut(value))
            }
        } catch {
            failed = true
            context.fireErrorCaught(error)
            context.close(promise: nil)
        }
    }
}
