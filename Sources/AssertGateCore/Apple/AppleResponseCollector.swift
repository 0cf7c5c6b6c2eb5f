import NIOCore
import NIOHTTP1

/// Gathers the answer to the request in flight (at most `maxBody` bytes) and
/// completes its promise at the answer's end, or fails it when the connection
/// ends first (before any byte: `closedBeforeAnswer`); a TLS failure names
/// OpenSSL's reason. One request at a time per connection.
final class AppleResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let maxBody: Int
    private var promise: EventLoopPromise<AppleHTTPSClient.Response>?
    private var status = 0
    private var body: [UInt8] = []
    private var started = false
    /// Whether the last complete answer lets the connection be reused.
    private(set) var keepAlive = false

    init(maxBody: Int) {
        self.maxBody = maxBody
    }

    func expect(_ promise: EventLoopPromise<AppleHTTPSClient.Response>) {
        self.promise = promise
        status = 0
        body = []
        started = false
        keepAlive = false
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            started = true
            status = Int(head.status.code)
            keepAlive = head.isKeepAlive
        case .body(let buffer):
            guard body.count + buffer.readableBytes <= maxBody else {
                fail(AppleHTTPSClient.ClientError.bodyTooLarge(maxBody))
                context.close(promise: nil)
                return
            }
            body += buffer.readableBytesView
        case .end:
            let done = promise
            promise = nil
            done?.succeed(AppleHTTPSClient.Response(status: status, body: body))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tls = error as? TLSConnectionError {
            fail(AppleHTTPSClient.ClientError.connect("TLS: \(tls.reason)"))
        } else {
            fail(error)
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(started ? AppleHTTPSClient.ClientError.closedEarly : AppleHTTPSClient.ClientError.closedBeforeAnswer)
        context.fireChannelInactive()
    }

    private func fail(_ error: any Error) {
        let p = promise
        promise = nil
        keepAlive = false
        p?.fail(error)
    }
}
