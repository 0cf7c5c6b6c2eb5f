import GatewayTLS
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// POSTs to Apple's App Attest data endpoint (`baseURL` is
/// `https://host[:port]`) over TLS, the server verified like any `rediss://`
/// Redis (`TLSClientContext`). Connections are kept alive between requests
/// (up to `maxIdle`, each for `idleTimeout`): a fleet refreshing many keys
/// would otherwise pay a TLS handshake per key. A kept connection that the
/// server closed in the meantime fails before any answer arrives; the
/// request is then sent once more on a new connection.
final class AppleDataClient: Sendable {
    struct Response: Sendable {
        var status: Int
        var body: [UInt8]
    }

    enum ClientError: Error, CustomStringConvertible {
        case timedOut
        case closedEarly
        /// Closed before any byte of the answer: on a kept connection, the
        /// server may have closed it while it was idle.
        case closedBeforeAnswer
        case bodyTooLarge
        case connect(String)

        var description: String {
            switch self {
            case .timedOut: return "no complete answer in time"
            case .closedEarly: return "connection closed before the answer was complete"
            case .closedBeforeAnswer: return "connection closed before an answer"
            case .bodyTooLarge: return "answer larger than \(AppleDataClient.maxBody) bytes"
            case .connect(let why): return why
            }
        }
    }

    /// A refreshed receipt is a few KiB of base64.
    static let maxBody = 64 * 1024
    static let maxIdle = 4
    static let idleTimeout = TimeAmount.seconds(30)

    let host: String
    let port: Int
    let tls: TLSClientContext
    let timeout: TimeAmount
    private let idle = NIOLockedValueBox<[(channel: any Channel, since: NIODeadline)]>([])
    private let opened = NIOLockedValueBox(0)

    /// Connections opened so far (for tests: reuse means fewer than requests).
    var connectionsOpened: Int { opened.withLockedValue { $0 } }

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
        let request = Request(path: path, authorization: authorization, body: body, hostHeader: hostHeader)
        if let kept = takeIdle(on: loop) {
            return exchange(request, on: kept, loop: loop).flatMapError { error in
                guard case ClientError.closedBeforeAnswer = error else { return loop.makeFailedFuture(error) }
                return self.connect(on: loop).flatMap { self.exchange(request, on: $0, loop: loop) }
            }
        }
        return connect(on: loop).flatMap { self.exchange(request, on: $0, loop: loop) }
    }

    /// Closes the kept connections.
    func closeIdle() {
        let channels = idle.withLockedValue { list in
            defer { list = [] }
            return list.map(\.channel)
        }
        for c in channels { c.close(promise: nil) }
    }

    private struct Request: Sendable {
        var path: String
        var authorization: String
        var body: [UInt8]
        var hostHeader: String
    }

    private var hostHeader: String {
        port == 443 ? (host.contains(":") ? "[\(host)]" : host) : "\(HostPort(host: host, port: port))"
    }

    private func takeIdle(on loop: EventLoop) -> (any Channel)? {
        let now = NIODeadline.now()
        let (found, stale) = idle.withLockedValue { list -> ((any Channel)?, [any Channel]) in
            var stale: [any Channel] = []
            var found: (any Channel)?
            var keep: [(channel: any Channel, since: NIODeadline)] = []
            for entry in list {
                if !entry.channel.isActive || now - entry.since >= Self.idleTimeout {
                    stale.append(entry.channel)
                } else if found == nil, entry.channel.eventLoop === loop {
                    found = entry.channel
                } else {
                    keep.append(entry)
                }
            }
            list = keep
            return (found, stale)
        }
        for c in stale { c.close(promise: nil) }
        return found
    }

    private func putIdle(_ channel: any Channel) {
        let since = NIODeadline.now()
        let kept = idle.withLockedValue { list -> Bool in
            guard list.count < Self.maxIdle else { return false }
            list.append((channel, since))
            return true
        }
        guard kept else { return channel.close(promise: nil) }
        // Not reused within idleTimeout: closed.
        channel.eventLoop.scheduleTask(in: Self.idleTimeout) {
            let expired = self.idle.withLockedValue { list -> Bool in
                guard let i = list.firstIndex(where: { $0.channel === channel && $0.since == since }) else { return false }
                list.remove(at: i)
                return true
            }
            if expired { channel.close(promise: nil) }
        }
    }

    /// A new TLS connection, its handshake done (a refused certificate is
    /// reported with OpenSSL's reason).
    private func connect(on loop: EventLoop) -> EventLoopFuture<any Channel> {
        let host = self.host
        let tls = self.tls
        opened.withLockedValue { $0 += 1 }
        return ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(OpenSSLHandler(client: tls, serverName: host))
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(ResponseCollector())
                }
            }
            .connect(host: self.host, port: self.port)
            .flatMapError { error in
                loop.makeFailedFuture(ClientError.connect("cannot connect to \(host): \(error)"))
            }
            .flatMap { channel in
                OpenSSLHandler.clientHandshake(on: channel, deadline: .now() + self.timeout).map { channel }
                    .flatMapErrorThrowing { error in throw ClientError.connect("TLS to \(host): \(error)") }
            }
    }

    /// One request and its answer on `channel`; the channel is kept for the
    /// next request when the answer allows it, closed otherwise.
    private func exchange(_ request: Request, on channel: any Channel, loop: EventLoop) -> EventLoopFuture<Response> {
        let promise = loop.makePromise(of: Response.self)
        let deadline = loop.scheduleTask(in: timeout) { promise.fail(ClientError.timedOut) }
        do {
            let collector = try channel.pipeline.syncOperations.handler(type: ResponseCollector.self)
            collector.expect(promise)
            let bound = NIOLoopBound(collector, eventLoop: loop)
            var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: request.path)
            head.headers.add(name: "Host", value: request.hostHeader)
            head.headers.add(name: "Authorization", value: request.authorization)
            head.headers.add(name: "Content-Length", value: String(request.body.count))
            channel.write(HTTPClientRequestPart.head(head), promise: nil)
            channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: request.body))), promise: nil)
            channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            promise.futureResult.whenComplete { result in
                deadline.cancel()
                if case .success = result, bound.value.keepAlive, channel.isActive {
                    self.putIdle(channel)
                } else {
                    channel.close(promise: nil)
                }
            }
        } catch {
            deadline.cancel()
            channel.close(promise: nil)
            promise.fail(ClientError.closedBeforeAnswer)
        }
        return promise.futureResult
    }
}

/// Gathers the answer to the request in flight (bounded) and completes its
/// promise at the answer's end, or fails it when the connection ends first
/// (before any byte: `closedBeforeAnswer`); a TLS failure names OpenSSL's
/// reason. One request at a time per connection.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private var promise: EventLoopPromise<AppleDataClient.Response>?
    private var status = 0
    private var body: [UInt8] = []
    private var started = false
    /// Whether the last complete answer lets the connection be reused.
    private(set) var keepAlive = false

    func expect(_ promise: EventLoopPromise<AppleDataClient.Response>) {
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
            guard body.count + buffer.readableBytes <= AppleDataClient.maxBody else {
                fail(AppleDataClient.ClientError.bodyTooLarge)
                context.close(promise: nil)
                return
            }
            body += buffer.readableBytesView
        case .end:
            let done = promise
            promise = nil
            done?.succeed(AppleDataClient.Response(status: status, body: body))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tls = error as? TLSConnectionError {
            fail(AppleDataClient.ClientError.connect("TLS: \(tls.reason)"))
        } else {
            fail(error)
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(started ? AppleDataClient.ClientError.closedEarly : AppleDataClient.ClientError.closedBeforeAnswer)
        context.fireChannelInactive()
    }

    private func fail(_ error: any Error) {
        let p = promise
        promise = nil
        keepAlive = false
        p?.fail(error)
    }
}
