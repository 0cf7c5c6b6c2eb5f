import AssertGateCore
import AssertGateTestSupport
import DeviceSim
import Foundation
import GatewayTLS
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Verifier

/// Apple's App Attest data endpoint, played over HTTPS on 127.0.0.1 (the
/// TestPKI server certificate): `POST /v1/attestationData` with a receipt in
/// base64 answers, by default, a fresh RECEIPT receipt for the same App ID and
/// attested key, signed by the test receipt CA, with `riskMetric`. Answers can
/// be scripted one request at a time. Every request is recorded.
final class FakeAppleDataServer: Sendable {
    enum Answer: Sendable {
        case receipt(riskMetric: Int, notBeforeInSeconds: Int64?)
        case status(Int)
        /// 200 with a receipt signed by a CA nobody trusts.
        case untrustedReceipt
    }

    struct Request: Sendable {
        var method: String
        var path: String
        var authorization: String?
        var body: [UInt8]
    }

    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let state = NIOLockedValueBox<(script: [Answer], requests: [Request])>(([], []))
    let defaultRiskMetric: Int

    var baseURL: String { "https://127.0.0.1:\(port)" }
    /// Connections accepted so far.
    var connections: Int { accepted.withLockedValue { $0 } }
    private let accepted = NIOLockedValueBox(0)
    /// false: every answer says `Connection: close` and the connection ends.
    let keepAlive: Bool
    /// true: each connection's first request is answered keep-alive; a
    /// later request on it is met with a close and no answer, as when a
    /// server's idle timeout closed it just before the request arrived.
    let dropIdle: Bool
    var requests: [Request] { state.withLockedValue { $0.requests } }

    /// The next answers, in order; once used up, `receipt(defaultRiskMetric)`.
    func script(_ answers: [Answer]) { state.withLockedValue { $0.script += answers } }

    init(
        pki: TestPKI, receiptCA: ReceiptCA, receiptRoot: String, defaultRiskMetric: Int = 3, keepAlive: Bool = true,
        dropIdle: Bool = false
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        self.keepAlive = keepAlive
        self.dropIdle = dropIdle
        let accepted = self.accepted
        self.defaultRiskMetric = defaultRiskMetric
        let tls = try TLSServerContext(
            certificatePath: pki.serverCertificate, privateKeyPath: pki.serverKey, alpn: ["http/1.1"])
        let anchors = try TrustAnchors(pemFiles: [receiptRoot])
        let untrusted = try ReceiptCA(name: "Untrusted Receipt")
        let box = NIOLockedValueBox<FakeAppleDataServer?>(nil)
        self.channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                accepted.withLockedValue { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(OpenSSLHandler(context: tls))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: false)
                    try channel.pipeline.syncOperations.addHandler(FakeAppleHandler(keepAlive: keepAlive, dropIdle: dropIdle) { request in
                        guard let server = box.withLockedValue({ $0 }) else { return (503, []) }
                        return server.answer(request, anchors: anchors, receiptCA: receiptCA, untrusted: untrusted)
                    })
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.port = channel.localAddress?.port ?? 0
        box.withLockedValue { $0 = self }
    }

    func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }

    private func answer(_ request: Request, anchors: TrustAnchors, receiptCA: ReceiptCA, untrusted: ReceiptCA)
        -> (Int, [UInt8])
    {
        let next: Answer = state.withLockedValue { s in
            s.requests.append(request)
            return s.script.isEmpty ? .receipt(riskMetric: defaultRiskMetric, notBeforeInSeconds: nil) : s.script.removeFirst()
        }
        guard request.method == "POST", request.path == "/v1/attestationData" else { return (404, []) }
        switch next {
        case .status(let code):
            return (code, [])
        case .receipt(let risk, let notBefore):
            return refreshed(request.body, risk: risk, notBefore: notBefore, anchors: anchors, signer: receiptCA)
        case .untrustedReceipt:
            return refreshed(request.body, risk: 1, notBefore: nil, anchors: anchors, signer: untrusted)
        }
    }

    /// What Apple does: read the old receipt, answer a new one for the same key.
    private func refreshed(_ body: [UInt8], risk: Int, notBefore: Int64?, anchors: TrustAnchors, signer: ReceiptCA)
        -> (Int, [UInt8])
    {
        guard let text = String(bytes: body, encoding: .utf8), let old = try? Base64.decode(text),
            let receipt = try? ReceiptVerifier.verify(receipt: old, anchors: anchors)
        else { return (400, []) }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let payload = ReceiptPayload(
            appId: receipt.appId, attestedPublicKey: receipt.attestedCertificate, clientHash: [0x01],
            token: "refreshed", kind: .receipt, environment: .sandbox, createdAtMillis: now, riskMetric: risk,
            notBeforeMillis: notBefore.map { now + $0 * 1000 }, expiresAtMillis: now + 30 * 86_400_000)
        guard let signed = try? signer.sign(payload) else { return (500, []) }
        return (200, Array(Base64.encode(signed).utf8))
    }
}

private final class FakeAppleHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let respond: @Sendable (FakeAppleDataServer.Request) -> (Int, [UInt8])
    private let keepAlive: Bool
    private let dropIdle: Bool
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var answered = 0

    init(keepAlive: Bool, dropIdle: Bool, respond: @escaping @Sendable (FakeAppleDataServer.Request) -> (Int, [UInt8])) {
        self.keepAlive = keepAlive
        self.dropIdle = dropIdle
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = []
        case .body(let b):
            body += b.readableBytesView
        case .end:
            guard let head else { return }
            if dropIdle, answered > 0 {
                context.close(promise: nil)
                return
            }
            answered += 1
            let (status, answer) = respond(FakeAppleDataServer.Request(
                method: head.method.rawValue, path: head.uri, authorization: head.headers.first(name: "authorization"),
                body: body))
            var response = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status))
            response.headers.add(name: "Content-Length", value: String(answer.count))
            let keep = keepAlive && head.isKeepAlive
            if !keep { response.headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(response)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer)))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keep { channel.close(promise: nil) }
            }
        }
    }
}
