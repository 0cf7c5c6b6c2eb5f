import GatewayTLS
import NIOCore
import NIOHTTP1

/// Chooses the front end for a connection: HTTP/2 when the client starts with
/// the connection preface (h2c prior knowledge) or when told so (ALPN "h2" from
/// a TLS handler in front), HTTP/1.1 otherwise. Replaces itself once decided.
final class ProtocolDetector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    enum Mode: Sendable {
        /// Peek at the first bytes (cleartext listener).
        case detect
        /// Already negotiated (e.g. ALPN).
        case http2
        case http1
        /// Wait for a `TLSHandshakeCompleted` or `ProtocolDetector.Negotiated` user event (fired by a TLS handler in
        /// front once ALPN is done); bytes arriving before it are buffered.
        case awaitNegotiation
    }

    /// Fire this inbound user event (or `TLSHandshakeCompleted`) after the handshake:
    /// `protocol` is the ALPN result ("h2", "http/1.1" or nil = no ALPN → detect by preface).
    struct Negotiated: Sendable {
        var alpn: String?
        init(alpn: String?) { self.alpn = alpn }
    }

    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private let worker: Worker
    private let mode: Mode
    private let scheme: String
    /// The connection's timeouts (nil in tests that build a bare pipeline):
    /// marked established once a front end is chosen, and handed to it.
    private let timeouts: ConnectionTimeoutHandler?
    private var buffered: ByteBuffer?
    private var decided = false

    init(worker: Worker, mode: Mode = .detect, scheme: String = "http", timeouts: ConnectionTimeoutHandler? = nil) {
        self.worker = worker
        self.mode = mode
        self.scheme = scheme
        self.timeouts = timeouts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        switch mode {
        case .detect, .awaitNegotiation: break
        case .http2: install(http2: true, context: context)
        case .http1: install(http2: false, context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decided else {
            context.fireChannelRead(data)
            return
        }
        var incoming = unwrapInboundIn(data)
        if buffered == nil {
            buffered = incoming
        } else {
            buffered?.writeBuffer(&incoming)
        }
        if waitingForNegotiation { return }
        detect(context: context)
    }

    private var waitingForNegotiation: Bool {
        if case .awaitNegotiation = mode, !negotiated { return true }
        return false
    }
    private var negotiated = false

    private func detect(context: ChannelHandlerContext) {
        guard let b = buffered else { return }
        let n = min(b.readableBytes, Self.preface.count)
        let matches = b.withUnsafeReadableBytes { bytes in
            for i in 0..<n where bytes[i] != Self.preface[i] { return false }
            return true
        }
        if !matches {
            install(http2: false, context: context)
        } else if b.readableBytes >= Self.preface.count {
            install(http2: true, context: context)
        }
        // else: a prefix of the preface so far, wait for more bytes.
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        let alpnResult: String??
        if let n = event as? Negotiated {
            alpnResult = .some(n.alpn)
        } else if let t = event as? TLSHandshakeCompleted {
            alpnResult = .some(t.negotiatedALPN)
        } else {
            alpnResult = nil
        }
        if let alpn = alpnResult, !decided {
            negotiated = true
            switch alpn {
            case "h2": install(http2: true, context: context)
            case "http/1.1", "http/1.0": install(http2: false, context: context)
            default: detect(context: context)
            }
            return
        }
        if event is ChannelShouldQuiesceEvent, !decided {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func install(http2: Bool, context: ChannelHandlerContext) {
        decided = true
        let sync = context.pipeline.syncOperations
        do {
            if http2 {
                try sync.addHandler(
                    HTTP2ServerConnection(worker: worker, scheme: scheme, timeouts: timeouts), position: .after(self))
            } else {
                var limits = NIOHTTPDecoderLimitConfiguration()
                let max = worker.snapshot.config.limits.maxHeaderListBytes
                limits.maxHeaderListSize = max
                limits.maxHeaderFieldSize = max
                let handler = HTTP1ServerHandler(worker: worker, scheme: scheme, timeouts: timeouts)
                try sync.addHandler(handler, position: .after(self))
                try sync.configureHTTPServerPipeline(
                    position: .after(self), withPipeliningAssistance: true, withServerUpgrade: nil,
                    withErrorHandling: false, withOutboundHeaderValidation: true,
                    withEncoderConfiguration: .init(), withDecoderLimitConfiguration: limits)
            }
        } catch {
            context.close(promise: nil)
            return
        }
        if let observer = worker.observer {
            observer.connectionOpened(http2: http2)
            let bound = NIOLoopBound(observer, eventLoop: context.eventLoop)
            context.channel.closeFuture.whenComplete { _ in bound.value.connectionClosed(http2: http2) }
        }
        if let timeouts, !http2 {
            // (HTTP/2 is established by its client's SETTINGS: HTTP2ServerConnection.)
            if let b = buffered, b.readableBytes > 0 {
                // The bytes read to choose HTTP/1.1 are the start of its first request
                // head: its header clock runs from them, not from the next read.
                timeouts.markEstablished()
                timeouts.requestHeadStarted()
            } else {
                // Chosen by ALPN: the first request byte is still to come.
                timeouts.establishAtFirstByte()
            }
        }
        if let b = buffered {
            buffered = nil
            context.fireChannelRead(wrapInboundOut(b))
        }
        sync.removeHandler(context: context, promise: nil)
    }
}
