import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

@testable import AssertGateRedis

/// A fake Redis on 127.0.0.1 whose every answer the test decides: `responder`
/// gets the connection's index (0 = first accepted) and the command, and
/// returns the raw RESP reply as a future, so a test can hold a handshake
/// step exactly as long as it needs to observe the client mid-connect.
final class ScriptedRedisServer: Sendable {
    typealias Responder = @Sendable (_ connection: Int, _ command: [String]) -> EventLoopFuture<String>

    private let server: Channel
    private let accepted = NIOLockedValueBox<[Channel]>([])
    let port: Int

    init(group: EventLoopGroup, responder: @escaping Responder) async throws {
        let accepted = self.accepted
        server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                let index = accepted.withLockedValue { list in
                    list.append(channel)
                    return list.count - 1
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        RESPValueDecoder(), ScriptedHandler(connection: index, responder: responder))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = server.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        self.port = port
    }

    /// Connections accepted so far (connect attempts that reached TCP).
    var connectionCount: Int { accepted.withLockedValue { $0.count } }

    func closeConnection(_ index: Int) async throws {
        let channel = accepted.withLockedValue { $0[index] }
        try await channel.close()
    }

    func close() async throws {
        for channel in accepted.withLockedValue({ $0 }) { try? await channel.close() }
        try await server.close()
    }
}

/// Answers commands in order; a held reply also holds the ones after it.
private final class ScriptedHandler: ChannelInboundHandler {
    typealias InboundIn = RESPValue
    typealias OutboundOut = ByteBuffer

    private let connection: Int
    private let responder: ScriptedRedisServer.Responder
    private var previous: EventLoopFuture<Void>?

    init(connection: Int, responder: @escaping ScriptedRedisServer.Responder) {
        self.connection = connection
        self.responder = responder
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .array(let parts) = unwrapInboundIn(data) else { return }
        let command = parts.compactMap(\.string)
        let loop = context.eventLoop
        let reply = responder(connection, command).hop(to: loop)
        let bound = NIOLoopBound(context, eventLoop: loop)
        let after = previous ?? loop.makeSucceededVoidFuture()
        previous = after.flatMap { reply }.map { text in
            bound.value.writeAndFlush(NIOAny(ByteBuffer(string: text)), promise: nil)
        }
    }
}

/// Client commands (RESP arrays) as `RESPValue`s, parsed by the gateway's own
/// `RESPReader`; a malformed stream closes the connection.
final class RESPValueDecoder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = RESPValue

    private let reader: RESPReader?

    init(limits: RESPLimits = .default) {
        reader = try? RESPReader(limits: limits)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let reader else {
            context.close(promise: nil)
            return
        }
        let buffer = unwrapInboundIn(data)
        do {
            try buffer.withUnsafeReadableBytes { bytes throws(RESPDecodingError) in try reader.feed(bytes) }
            while let value = try reader.next() { context.fireChannelRead(wrapInboundOut(value)) }
        } catch {
            context.fireErrorCaught(error)
            context.close(promise: nil)
        }
    }
}
