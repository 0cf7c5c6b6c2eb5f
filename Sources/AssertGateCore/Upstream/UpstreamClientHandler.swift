import GatewayTLS
import NIOCore

/// The last handler of an upstream channel: parses responses
/// (`UpstreamResponseParser`, straight from the socket's buffers) for the
/// connection and holds `read()` while the downstream is congested
/// (back-pressure). Writes the request (head bytes, body, chunk framing)
/// from its own context, towards the socket (and TLS, when there is one).
final class UpstreamClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    /// Nothing passes through this handler outbound (it is the last one); it
    /// writes from its own context and holds `read()`.
    typealias OutboundIn = ByteBuffer

    var connection: UpstreamConnection?
    var readsPaused = false
    private var pendingRead = false
    private var context: ChannelHandlerContext?
    /// An `UncheckedCell` (no runtime exclusivity check on the four or so
    /// accesses of a response): the parser's methods read bytes and call out
    /// to nothing, and the connection is called only after an access ends.
    private let parserCell = UncheckedCell(UpstreamResponseParser())
    private var parser: UpstreamResponseParser {
        _read { yield parserCell.value }
        _modify { yield &parserCell.value }
    }

    /// The TLS handler in front of this one (nil: cleartext), for whether the
    /// peer's close came with close_notify. It holds no reference back.
    private let tls: OpenSSLHandler?

    init(tls: OpenSSLHandler?) {
        self.tls = tls
    }

    /// The last handler of an upstream channel, after `tls` when there is one.
    /// Adds a handler and returns it: whoever connects keeps it, no pipeline lookup by type.
    @discardableResult
    static func install(on pipeline: ChannelPipeline.SynchronousOperations, tls: OpenSSLHandler? = nil) throws
        -> UpstreamClientHandler
    {
        let handler = UpstreamClientHandler(tls: tls)
        try pipeline.addHandler(handler)
        return handler
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func writeHead(_ head: UpstreamRequestHead, flush: Bool) {
        parser.expectResponse(isHead: head.isHead)
        guard flush else { return write(head.bytes, promise: nil) }
        context?.writeAndFlush(NIOAny(head.bytes), promise: nil)
    }

    func write(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard let ctx = context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        ctx.write(NIOAny(buffer), promise: promise)
    }

    func writeChunk(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        let n = buffer.readableBytes
        guard n > 0 else {
            promise?.succeed()
            return
        }
        var header = (context?.channel.allocator ?? ByteBufferAllocator()).buffer(capacity: 18)
        header.writeString(String(n, radix: 16))
        header.writeStaticString("\r\n")
        write(header, promise: nil)
        write(buffer, promise: nil)
        var crlf = header
        crlf.clear()
        crlf.writeStaticString("\r\n")
        write(crlf, promise: promise)
    }

    func writeLastChunk() {
        var last = (context?.channel.allocator ?? ByteBufferAllocator()).buffer(capacity: 5)
        last.writeStaticString("0\r\n\r\n")
        write(last, promise: nil)
    }

    func flush() { context?.flush() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        connection?.receivedBytes()
        do {
            while true {
                // The parser's access ends with each event: what the connection does
                // with it (release, a new exchange's writeHead) may touch the parser.
                switch try parser.next(&buffer) {
                case .needMore:
                    return
                case .interim(let head):
                    connection?.receivedInterim(head)
                case .head(let head, let keepAlive):
                    connection?.receivedHead(head, keepAlive: keepAlive)
                case .body(let slice):
                    connection?.receivedBody(slice)
                case .end:
                    let trailing = buffer.readableBytes > 0
                    connection?.receivedEnd(reusable: !trailing)
                    if trailing { throw UpstreamResponseError.unexpectedBytes }
                    // Nothing left to parse: no call just to hear `.needMore`.
                    return
                }
            }
        } catch {
            // A response that cannot be read: the exchange fails via channelInactive.
            // Logged like nginx's "upstream sent invalid header": the upstream is broken.
            if let c = connection {
                c.responseInvalid = true
                c.endpoint.pool.logger.warning(
                    "upstream response refused", metadata: ["endpoint": "\(c.endpoint.endpoint)", "error": "\(error)"])
            }
            context.close(promise: nil)
        }
    }

    func read(context: ChannelHandlerContext) {
        if readsPaused {
            pendingRead = true
        } else {
            context.read()
        }
    }

    func resumeReads() {
        readsPaused = false
        if pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        let c = connection
        // A body delimited by the close is complete now, unless the close was
        // an error (a reset): then the client must see it cut, not complete.
        // NIO does not report every reset (one met while flushing a request body
        // closes without errorCaught), so a close before the request was fully
        // sent counts as an error too.
        // Over TLS only a close_notify ends such a body: a bare FIN could be
        // anyone's, and would pass a truncated body on as complete.
        if parser.connectionClosed(), !failed, c?.requestDone == true,
            c?.tls == nil || tls?.receivedCloseNotify == true
        {
            c?.receivedEnd(reusable: false)
        }
        connection = nil
        c?.channelClosed()
        context.fireChannelInactive()
    }

    /// An error (a reset) came before the close.
    private var failed = false

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Resets and the like: the exchange fails via channelInactive.
        failed = true
        context.close(promise: nil)
    }
}
