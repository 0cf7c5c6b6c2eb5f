import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// An upstream that answers every request head with bytes chosen by its path
/// (`answers[path]`), written as they are: for responses a well-behaved
/// server would never send. Counts the connections it accepted.
final class ScriptedUpstream: Sendable {
    let port: Int
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup
    private let accepted = NIOLockedValueBox(0)
    private let seen = NIOLockedValueBox<[String]>([])

    var connections: Int { accepted.withLockedValue { $0 } }
    /// "METHOD path" of every request head received, in order.
    var requests: [String] { seen.withLockedValue { $0 } }

    /// `closeAfter`: paths whose answer is followed by closing the connection;
    /// `resetAfter`: by resetting it (SO_LINGER 0, so the peer reads an RST);
    /// `stopReading`: paths whose head is the last thing read on the
    /// connection (no answer: the request body fills the sockets and stays).
    init(
        answers: [String: String], closeAfter: Set<String> = [], resetAfter: Set<String> = [],
        stopReading: Set<String> = []
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let accepted = self.accepted
        let seen = self.seen
        channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                accepted.withLockedValue { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        Handler(
                            answers: answers, closeAfter: closeAfter, resetAfter: resetAfter, stopReading: stopReading,
                            seen: seen))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
        self.group = group
    }

    func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let answers: [String: String]
        let closeAfter: Set<String>
        let resetAfter: Set<String>
        let stopReading: Set<String>
        let seen: NIOLockedValueBox<[String]>
        var received: [UInt8] = []
        var deaf = false

        init(
            answers: [String: String], closeAfter: Set<String>, resetAfter: Set<String>, stopReading: Set<String>,
            seen: NIOLockedValueBox<[String]>
        ) {
            self.answers = answers
            self.closeAfter = closeAfter
            self.resetAfter = resetAfter
            self.stopReading = stopReading
            self.seen = seen
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if deaf { return }
            received += Array(buffer: unwrapInboundIn(data))
            // One request head at a time (the tests send no bodies).
            while let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
                received.removeSubrange(..<end.upperBound)
                let words = head.split(separator: " ")
                let path = words.dropFirst().first.map(String.init) ?? ""
                seen.withLockedValue { $0.append("\(words.first ?? "") \(path)") }
                if stopReading.contains(path) {
                    deaf = true
                    context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
                    return
                }
                let answer = answers[path] ?? "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                let write = context.writeAndFlush(NIOAny(ByteBuffer(string: answer)))
                if closeAfter.contains(path) || resetAfter.contains(path) {
                    let reset = resetAfter.contains(path)
                    let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
                    write.whenComplete { _ in
                        guard reset, let provider = ctx.value.channel as? any SocketOptionProvider else {
                            return ctx.value.close(promise: nil)
                        }
                        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
                            ctx.value.close(promise: nil)
                        }
                    }
                }
            }
        }
    }
}
