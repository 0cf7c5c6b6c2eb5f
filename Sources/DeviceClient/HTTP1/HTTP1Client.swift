import NIOCore
import NIOHTTP1
import NIOPosix

/// HTTP/1.1 over one fresh connection per request (`request --http1.1`).
public struct HTTP1Client: HTTPRequester {
    public let target: GatewayURL
    public let group: EventLoopGroup
    public var maxResponseBodyBytes = 64 << 20
    public var timeout: TimeAmount = .seconds(30)

    public init(target: GatewayURL, group: EventLoopGroup) {
        self.target = target
        self.group = group
    }

    public func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        let maxBody = maxResponseBodyBytes
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .connect(host: target.host, port: target.port).get()
        let promise = channel.eventLoop.makePromise(of: HTTPClientResponse.self)
        do {
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(HTTP1ResponseCollector(promise: promise, maxBody: maxBody))
            }.get()
            var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: request.path)
            head.headers.add(name: "Host", value: request.authority)
            for (name, value) in request.headers { head.headers.add(name: name, value: value) }
            if !request.body.isEmpty || ["POST", "PUT", "PATCH"].contains(request.method) {
                head.headers.replaceOrAdd(name: "Content-Length", value: String(request.body.count))
            }
            head.headers.replaceOrAdd(name: "Connection", value: "close")
            channel.write(HTTPClientRequestPart.head(head), promise: nil)
            if !request.body.isEmpty {
                channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: request.body))), promise: nil)
            }
            channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            let timeout = self.timeout
            let timer = channel.eventLoop.scheduleTask(in: timeout) {
                promise.fail(HTTP1ClientError.timeout)
                channel.close(promise: nil)
            }
            let response = try await promise.futureResult.get()
            timer.cancel()
            try? await channel.close()
            return response
        } catch {
            promise.fail(error)
            try? await channel.close()
            throw error
        }
    }
}

public enum HTTP1ClientError: Error, Equatable, CustomStringConvertible {
    case connectionClosedEarly
    case responseTooLarge
    case timeout

    public var description: String {
        switch self {
        case .connectionClosedEarly: "connection closed before the response ended"
        case .responseTooLarge: "response body too large"
        case .timeout: "no complete response in time"
        }
    }
}

/// Gathers one response and completes the promise.
final class HTTP1ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<HTTPClientResponse>
    private let maxBody: Int
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private var finished = false

    init(promise: EventLoopPromise<HTTPClientResponse>, maxBody: Int) {
        self.promise = promise
        self.maxBody = maxBody
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            // Interim 1xx responses are followed by the real one.
            if h.status.code >= 200 { head = h }
        case .body(let buffer):
            guard head != nil else { return }
            if body.count + buffer.readableBytes > maxBody {
                complete(.failure(HTTP1ClientError.responseTooLarge))
                context.close(promise: nil)
                return
            }
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            let headers = head.headers.map { (name: $0.name, value: $0.value) }
            complete(.success(HTTPClientResponse(status: Int(head.status.code), headers: headers, body: body)))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        complete(.failure(HTTP1ClientError.connectionClosedEarly))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        complete(.failure(error))
        context.close(promise: nil)
    }

    private func complete(_ result: Result<HTTPClientResponse, Error>) {
        guard !finished else { return }
        finished = true
        promise.completeWith(result)
    }
}
