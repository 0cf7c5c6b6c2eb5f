import NIOCore
import NIOPosix

/// One cleartext HTTP/2 connection (prior knowledge) to a server, carrying many
/// concurrent streams within the server's SETTINGS_MAX_CONCURRENT_STREAMS.
///
/// Thread-safe: calls from other threads hop onto the connection's event loop.
public final class HTTP2Connection: Sendable {
    public let channel: Channel
    private let handler: NIOLoopBound<HTTP2ClientHandler>

    public var eventLoop: EventLoop { channel.eventLoop }

    private init(channel: Channel, handler: HTTP2ClientHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
    }

    /// Connects and completes once the server's first SETTINGS frame arrived.
    public static func connect(
        host: String, port: Int, eventLoop: EventLoop,
        configuration: HTTP2ClientConfiguration = HTTP2ClientConfiguration()
    ) -> EventLoopFuture<HTTP2Connection> {
        let ready = eventLoop.makePromise(of: Void.self)
        let connected = ClientBootstrap(group: eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(configuration.handshakeTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = HTTP2ClientHandler(configuration: configuration, readyPromise: ready)
                    try channel.pipeline.syncOperations.addHandler(handler)
                    return ()
                }
            }
            .connect(host: host, port: port)
        return connected.flatMap { channel in
            ready.futureResult.flatMapThrowing {
                let handler = try channel.pipeline.syncOperations.handler(type: HTTP2ClientHandler.self)
                return HTTP2Connection(channel: channel, handler: handler)
            }.flatMapErrorThrowing { error in
                channel.close(promise: nil)
                throw error
            }
        }.flatMapErrorThrowing { error in
            ready.fail(error)  // no-op when already completed; avoids a leaked promise
            throw error
        }
    }

    public static func connect(
        to url: GatewayURL, eventLoop: EventLoop,
        configuration: HTTP2ClientConfiguration = HTTP2ClientConfiguration()
    ) -> EventLoopFuture<HTTP2Connection> {
        connect(host: url.host, port: url.port, eventLoop: eventLoop, configuration: configuration)
    }

    /// Sends one request; the future fails with `HTTP2ClientError`.
    public func execute(_ request: HTTPClientRequest) -> EventLoopFuture<HTTPClientResponse> {
        let promise = eventLoop.makePromise(of: HTTPClientResponse.self)
        if eventLoop.inEventLoop {
            handler.value.enqueue(request, promise: promise)
        } else {
            let handler = self.handler
            eventLoop.execute { handler.value.enqueue(request, promise: promise) }
        }
        return promise.futureResult
    }

    public func execute(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        try await execute(request).get()
    }

    /// Loop-only: whether new requests may start here (no GOAWAY, not closed).
    public var acceptsRequestsOnLoop: Bool { handler.value.acceptsRequests }

    /// Loop-only: the server's current stream limit (capped by the configuration).
    public var streamLimitOnLoop: Int { handler.value.streamLimit }

    /// Loop-only: the most streams this connection had open at once.
    public var peakConcurrentStreamsOnLoop: Int { handler.value.peakConcurrentStreams }

    /// The server's stream limit, read on the loop.
    public func streamLimit() -> EventLoopFuture<Int> {
        let handler = self.handler
        return eventLoop.submit { handler.value.streamLimit }
    }

    public func peakConcurrentStreams() -> EventLoopFuture<Int> {
        let handler = self.handler
        return eventLoop.submit { handler.value.peakConcurrentStreams }
    }

    /// Sends GOAWAY and closes the connection.
    public func close() -> EventLoopFuture<Void> {
        let handler = self.handler
        let channel = self.channel
        return eventLoop.submit { handler.value.terminate() }.flatMap {
            channel.closeFuture
        }
    }
}
