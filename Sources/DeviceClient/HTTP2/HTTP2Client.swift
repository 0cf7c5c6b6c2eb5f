import NIOCore

/// A reconnecting HTTP/2 client for one server, bound to one event loop.
///
/// Requests that the server certainly did not process (GOAWAY above the
/// last-stream-id, REFUSED_STREAM, connection closed before sending) are retried
/// on a fresh connection up to `maxRetries` times; anything else is reported.
public final class HTTP2Client: Sendable {
    public let target: GatewayURL
    public let eventLoop: EventLoop
    public let configuration: HTTP2ClientConfiguration
    public let maxRetries: Int
    private let state: NIOLoopBoundBox<State>

    private enum Slot {
        case none
        case connecting(EventLoopFuture<HTTP2Connection>)
        case ready(HTTP2Connection)
    }

    private struct State {
        var slot: Slot = .none
        var connectionsOpened = 0
        var shutDown = false
    }

    public init(
        target: GatewayURL, eventLoop: EventLoop,
        configuration: HTTP2ClientConfiguration = HTTP2ClientConfiguration(), maxRetries: Int = 3
    ) {
        self.target = target
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.maxRetries = maxRetries
        self.state = NIOLoopBoundBox.makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// How many connections this client has opened so far (GOAWAY makes more).
    public func connectionsOpened() -> EventLoopFuture<Int> {
        let state = self.state
        return eventLoop.submit { state.value.connectionsOpened }
    }

    public func execute(_ request: HTTPClientRequest) -> EventLoopFuture<HTTPClientResponse> {
        eventLoop.flatSubmit { self.attempt(request, retriesLeft: self.maxRetries) }
    }

    public func execute(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        try await execute(request).get()
    }

    /// The current connection, opening one when there is none or it is going away.
    public func connection() -> EventLoopFuture<HTTP2Connection> {
        eventLoop.flatSubmit { self.currentConnection() }
    }

    public func shutdown() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.state.value.shutDown = true
            let slot = self.state.value.slot
            self.state.value.slot = .none
            switch slot {
            case .none: return self.eventLoop.makeSucceededVoidFuture()
            case .connecting(let future): return future.flatMap { $0.close() }.recover { _ in }
            case .ready(let connection): return connection.close().recover { _ in }
            }
        }
    }

    private func currentConnection() -> EventLoopFuture<HTTP2Connection> {
        if state.value.shutDown { return eventLoop.makeFailedFuture(HTTP2ClientError.closedBeforeSend) }
        switch state.value.slot {
        case .connecting(let future):
            return future
        case .ready(let connection) where connection.acceptsRequestsOnLoop:
            return eventLoop.makeSucceededFuture(connection)
        case .ready, .none:
            // Several requests may notice the dead connection at once; the
            // first one replaces it and the rest share the new future.
            let future = HTTP2Connection.connect(to: target, eventLoop: eventLoop, configuration: configuration)
            state.value.slot = .connecting(future)
            state.value.connectionsOpened += 1
            let state = self.state
            future.whenComplete { result in
                guard case .connecting(let current) = state.value.slot, current === future else { return }
                switch result {
                case .success(let connection): state.value.slot = .ready(connection)
                case .failure: state.value.slot = .none  // the next request tries again
                }
            }
            return future
        }
    }

    private func attempt(_ request: HTTPClientRequest, retriesLeft: Int) -> EventLoopFuture<HTTPClientResponse> {
        currentConnection().flatMap { connection in
            connection.execute(request)
        }.flatMapError { error in
            if let h2 = error as? HTTP2ClientError, h2.isRetryable, retriesLeft > 0 {
                return self.attempt(request, retriesLeft: retriesLeft - 1)
            }
            return self.eventLoop.makeFailedFuture(error)
        }
    }
}
