import GatewayTLS
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The one HTTPS/1.1 client for Apple's hosts (`baseURL` is
/// `https://host[:port]`): the App Attest data endpoint of receipt refresh and
/// the DeviceCheck API. The server is verified like any `rediss://` Redis
/// (`TLSClientContext`). Connections are kept alive between requests (up to
/// `maxIdle`, each for `idleTimeout`): a fleet refreshing many keys, or a
/// gateway asking DeviceCheck on every request, would otherwise pay a TLS
/// handshake per call. A kept connection that the server closed in the
/// meantime fails before any answer arrives; the request is then sent once
/// more on a new connection. Answers are read up to `maxBody` bytes.
final class AppleHTTPSClient: Sendable {
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
        case bodyTooLarge(Int)
        case connect(String)

        var description: String {
            switch self {
            case .timedOut: return "no complete answer in time"
            case .closedEarly: return "connection closed before the answer was complete"
            case .closedBeforeAnswer: return "connection closed before an answer"
            case .bodyTooLarge(let limit): return "answer larger than \(limit) bytes"
            case .connect(let why): return why
            }
        }
    }

    /// A refreshed receipt is a few KiB of base64.
    static let defaultMaxBody = 64 * 1024
    static let maxIdle = 4
    static let idleTimeout = TimeAmount.seconds(30)

    let host: String
    let port: Int
    let tls: TLSClientContext
    /// For a call that names none.
    let timeout: TimeAmount
    let maxBody: Int
    /// Shared with every other outbound connection (`HostAddressCache`).
    let addressCache: HostAddressCache
    private let idle = NIOLockedValueBox<[(connection: Connection, since: NIODeadline)]>([])

    /// A connection and the handler that reads its answers, kept together
    /// from the moment they are installed (no pipeline lookup by type).
    private struct Connection: Sendable {
        var channel: any Channel
        var collector: NIOLoopBound<AppleResponseCollector>
    }
    private let opened = NIOLockedValueBox(0)

    /// Connections opened so far (for tests: reuse means fewer than requests).
    var connectionsOpened: Int { opened.withLockedValue { $0 } }

    /// `baseURL` as validated by the config loader: `https://host[:port]`.
    init?(
        baseURL: String, tls: TLSClientContext, timeout: TimeAmount = .seconds(15), maxBody: Int = defaultMaxBody,
        addressCache: HostAddressCache = .shared
    ) {
        guard baseURL.hasPrefix("https://") else { return nil }
        var rest = String(baseURL.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest.removeLast() }
        let hostPort = rest.contains(":") && !rest.hasSuffix("]") ? rest : rest + ":443"
        guard case .success(let hp) = ConfigSyntax.hostPort(hostPort) else { return nil }
        self.host = hp.host
        self.port = hp.port
        self.tls = tls
        self.timeout = timeout
        self.maxBody = maxBody
        self.addressCache = addressCache
    }

    /// POSTs `body` to `path`. The whole call (connect, handshake, answer)
    /// has `timeout` (the client's when nil).
    func post(
        path: String, authorization: String, contentType: String? = nil, body: [UInt8], timeout: TimeAmount? = nil,
        on loop: EventLoop
    ) -> EventLoopFuture<Response> {
        // A kept connection is driven with its pipeline's sync operations: on its loop.
        guard loop.inEventLoop else {
            return loop.flatSubmit {
                self.post(
                    path: path, authorization: authorization, contentType: contentType, body: body, timeout: timeout,
                    on: loop)
            }
        }
        let deadline = NIODeadline.now() + (timeout ?? self.timeout)
        let request = Request(
            path: path, authorization: authorization, contentType: contentType, body: body, hostHeader: hostHeader)
        if let kept = takeIdle(on: loop) {
            return exchange(request, on: kept, deadline: deadline, loop: loop).flatMapError { error in
                guard case ClientError.closedBeforeAnswer = error else { return loop.makeFailedFuture(error) }
                return self.connect(on: loop, deadline: deadline).flatMap {
                    self.exchange(request, on: $0, deadline: deadline, loop: loop)
                }
            }
        }
        return connect(on: loop, deadline: deadline).flatMap {
            self.exchange(request, on: $0, deadline: deadline, loop: loop)
        }
    }

    /// Closes the kept connections.
    func closeIdle() {
        let channels = idle.withLockedValue { list in
            defer { list = [] }
            return list.map(\.connection.channel)
        }
        for c in channels { c.close(promise: nil) }
    }

    private struct Request: Sendable {
        var path: String
        var authorization: String
        var contentType: String?
        var body: [UInt8]
        var hostHeader: String
    }

    private var hostHeader: String {
        port == 443 ? (host.contains(":") ? "[\(host)]" : host) : "\(HostPort(host: host, port: port))"
    }

    private func takeIdle(on loop: EventLoop) -> Connection? {
        let now = NIODeadline.now()
        let (found, stale) = idle.withLockedValue { list -> (Connection?, [any Channel]) in
            var stale: [any Channel] = []
            var found: Connection?
            var keep: [(connection: Connection, since: NIODeadline)] = []
            for entry in list {
                let channel = entry.connection.channel
                if !channel.isActive || now - entry.since >= Self.idleTimeout {
                    stale.append(channel)
                } else if found == nil, channel.eventLoop === loop {
                    found = entry.connection
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

    private func putIdle(_ connection: Connection) {
        let channel = connection.channel
        let since = NIODeadline.now()
        let kept = idle.withLockedValue { list -> Bool in
            guard list.count < Self.maxIdle else { return false }
            list.append((connection, since))
            return true
        }
        guard kept else { return channel.close(promise: nil) }
        // Not reused within idleTimeout: closed.
        channel.eventLoop.scheduleTask(in: Self.idleTimeout) {
            let expired = self.idle.withLockedValue { list -> Bool in
                guard let i = list.firstIndex(where: { $0.connection.channel === channel && $0.since == since }) else {
                    return false
                }
                list.remove(at: i)
                return true
            }
            if expired { channel.close(promise: nil) }
        }
    }

    /// A new TLS connection, its handshake done by `deadline` (a refused
    /// certificate is reported with OpenSSL's reason).
    private func connect(on loop: EventLoop, deadline: NIODeadline) -> EventLoopFuture<Connection> {
        let host = self.host
        let tls = self.tls
        let maxBody = self.maxBody
        let remaining = deadline - .now()
        guard remaining > .zero else { return loop.makeFailedFuture(ClientError.timedOut) }
        opened.withLockedValue { $0 += 1 }
        // The channel lives on `loop`: its initializer hands its handlers over here.
        let installed = NIOLoopBoundBox<(tls: OpenSSLHandler?, collector: AppleResponseCollector?)>(
            (nil, nil), eventLoop: loop)
        return ClientBootstrap(group: loop)
            .connectTimeout(remaining)
            .resolver(addressCache.resolver(on: loop))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    let handler = OpenSSLHandler(client: tls, serverName: host)
                    try sync.addHandler(handler)
                    try sync.addHTTPClientHandlers()
                    let collector = AppleResponseCollector(maxBody: maxBody)
                    try sync.addHandler(collector)
                    installed.value = (handler, collector)
                }
            }
            .connect(host: self.host, port: self.port)
            .flatMapError { error in
                loop.makeFailedFuture(ClientError.connect("cannot connect to \(host): \(error)"))
            }
            .flatMap { channel -> EventLoopFuture<Connection> in
                guard let handler = installed.value.tls, let collector = installed.value.collector else {
                    channel.close(promise: nil)
                    return loop.makeFailedFuture(ClientError.connect("TLS to \(host): no handshake started"))
                }
                let connection = Connection(channel: channel, collector: NIOLoopBound(collector, eventLoop: loop))
                return handler.clientHandshake(on: channel, deadline: deadline).map { connection }
                    .flatMapErrorThrowing { error in
                        channel.close(promise: nil)
                        throw ClientError.connect("TLS to \(host): \(error)")
                    }
            }
    }

    /// One request and its answer on `channel`; the channel is kept for the
    /// next request when the answer allows it, closed otherwise.
    private func exchange(
        _ request: Request, on connection: Connection, deadline: NIODeadline, loop: EventLoop
    ) -> EventLoopFuture<Response> {
        let channel = connection.channel
        let promise = loop.makePromise(of: Response.self)
        // Closed while it was kept: a fresh connection is made (`post`).
        guard channel.isActive else {
            promise.fail(ClientError.closedBeforeAnswer)
            return promise.futureResult
        }
        let timer = loop.scheduleTask(deadline: deadline) { promise.fail(ClientError.timedOut) }
        let bound = connection.collector
        bound.value.expect(promise)
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: request.path)
        head.headers.add(name: "Host", value: request.hostHeader)
        head.headers.add(name: "Authorization", value: request.authorization)
        if let type = request.contentType { head.headers.add(name: "Content-Type", value: type) }
        head.headers.add(name: "Content-Length", value: String(request.body.count))
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: request.body))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        promise.futureResult.whenComplete { result in
            timer.cancel()
            if case .success = result, bound.value.keepAlive, channel.isActive {
                self.putIdle(connection)
            } else {
                channel.close(promise: nil)
            }
        }
        return promise.futureResult
    }
}
