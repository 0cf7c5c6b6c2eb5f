import NIOCore
import NIOHTTP1

/// One connection of the mock: reads a request (body at most `maxBody`
/// bytes, else 413 and close), asks the server what to do, and does it after
/// the endpoint's latency.
final class AppleMockHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    struct Request: Sendable {
        var method: String
        var uri: String
        var authorization: String?
        var body: [UInt8]
        var connection: Int
    }

    static let maxBody = 64 * 1024

    private let connection: Int
    private let keepAlive: Bool
    private let dropIdle: Bool
    private let respond: @Sendable (Request) -> (AppleMockResponse, TimeAmount)
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var answered = 0

    init(
        connection: Int, keepAlive: Bool, dropIdle: Bool,
        respond: @escaping @Sendable (Request) -> (AppleMockResponse, TimeAmount)
    ) {
        self.connection = connection
        self.keepAlive = keepAlive
        self.dropIdle = dropIdle
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = []
            tooLarge = false
        case .body(let b):
            if body.count + b.readableBytes > Self.maxBody { tooLarge = true }
            if !tooLarge { body += b.readableBytesView }
        case .end:
            guard let head else { return }
            self.head = nil
            if tooLarge {
                write(context, .text(413, "request body too large"), keep: false)
                return
            }
            if dropIdle, answered > 0 {
                context.close(promise: nil)
                return
            }
            answered += 1
            let (response, latency) = respond(
                Request(
                    method: head.method.rawValue, uri: head.uri, authorization: head.headers.first(name: "authorization"),
                    body: body, connection: connection))
            let keep = keepAlive && head.isKeepAlive
            guard latency > .zero else { return write(context, response, keep: keep) }
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: latency) {
                let (handler, context) = bound.value
                guard context.channel.isActive else { return }
                handler.write(context, response, keep: keep)
            }
        }
    }

    private func write(_ context: ChannelHandlerContext, _ response: AppleMockResponse, keep: Bool) {
        switch response {
        case .stall:
            return
        case .close:
            context.close(promise: nil)
        case .answer(let status, let body, let contentType):
            var head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status))
            head.headers.add(name: "Content-Type", value: contentType)
            head.headers.add(name: "Content-Length", value: String(body.count))
            if !keep { head.headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keep { channel.close(promise: nil) }
            }
        }
    }
}
