import NIOCore
import NIOHTTP1
import NIOPosix

/// POSTs to Apple's App Attest data endpoint (`baseURL` is
/// `https://host[:port]`) over TLS, the server verified like any `rediss://`
/// Redis (`TLSClientContext`). One connection per request: refreshes come a
/// few per key per day, and a fresh connection never meets a stale one.
final class AppleDataClient: Sendable {
    struct Response: Sendable {
        var status: Int
        var body: [UInt8]
    }

    enum ClientError: Error, CustomStringConvertible {
        case timedOut
        case closedEarly
        case bodyTooLarge
        case connect(String)

        var description: String {
            switch self {
            case .timedOut: return "no complete answer in time"
            case .closedEarly: return "connection closed before the answer was complete"
            case .bodyTooLarge: return "answer larger than \(AppleDataClient.maxBody) bytes"
            case .connect(let why): return why
            }
        }
    }

    /// A refreshed receipt is a few KiB of base64.
    static let maxBody = 64 * 1024

    let host: String
    let port: Int
    let tls: TLSClientContext
    let timeout: TimeAmount

    /// `baseURL` as validated by the config loader: `https://host[:port]`.
    init?(baseURL: String, tls: TLSClientContext, timeout: TimeAmount = .seconds(15)) {
        guard baseURL.hasPrefix("https://") else { return nil }
        var rest = String(baseURL.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest.removeLast() }
        let hostPort = rest.contains(":") && !rest.hasSuffix("]") ? rest : rest + ":443"
        guard case .success(let hp) = ConfigSyntax.hostPort(hostPort) else { return nil }
        self.host = hp.host
        self.port = hp.port
        self.tls = tls
        self.timeout = timeout
    }

    func post(path: String, authorization: String, body: [UInt8], on loop: EventLoop) -> EventLoopFuture<Response> {
        let promise = loop.makePromise(of: Response.self)
        let host = self.host
        let hostHeader = port == 443 ? (host.contains(":") ? "[\(host)]" : host) : "\(HostPort(host: host, port: port))"
        let tls = self.tls
        let deadline = loop.scheduleTask(in: timeout) { promise.fail(ClientError.timedOut) }
        promise.futureResult.whenComplete { _ in deadline.cancel() }
        ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(OpenSSLHandler(client: tls, serverName: host))
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(ResponseCollector(promise: promise))
                }
            }
            .connect(host: self.host, port: self.port)
            .whenComplete { result in
                switch result {
                case .failure(let error):
                    promise.fail(ClientError.connect("cannot connect to \(host): \(error)"))
                case .success(let channel):
                    promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
                    // A refused certificate: report OpenSSL's reason, not just the close.
                    if let handshake = try? channel.pipeline.syncOperations.handler(type: OpenSSLHandler.self)
                        .handshakeFuture
                    {
                        handshake.whenFailure { error in
                            let reason = (error as? TLSConnectionError)?.reason ?? "\(error)"
                            promise.fail(ClientError.connect("TLS to \(host): \(reason)"))
                        }
                    }
                    var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
                    head.headers.add(name: "Host", value: hostHeader)
                    head.headers.add(name: "Authorization", value: authorization)
                    head.headers.add(name: "Content-Length", value: String(body.count))
                    head.headers.add(name: "Connection", value: "close")
                    channel.write(HTTPClientRequestPart.head(head), promise: nil)
                    channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
                    channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                }
            }
        return promise.futureResult
    }
}

/// Gathers one response (bounded), completes the promise at its end or fails
/// it when the connection ends first; a TLS failure names OpenSSL's reason.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<AppleDataClient.Response>
    private var status = 0
    private var body: [UInt8] = []

    init(promise: EventLoopPromise<AppleDataClient.Response>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
        case .body(let buffer):
            guard body.count + buffer.readableBytes <= AppleDataClient.maxBody else {
                promise.fail(AppleDataClient.ClientError.bodyTooLarge)
                context.close(promise: nil)
                return
            }
            body += buffer.readableBytesView
        case .end:
            promise.succeed(AppleDataClient.Response(status: status, body: body))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tls = error as? TLSConnectionError {
            promise.fail(AppleDataClient.ClientError.connect("TLS: \(tls.reason)"))
        } else {
            promise.fail(error)
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(AppleDataClient.ClientError.closedEarly)
        context.fireChannelInactive()
    }
}
