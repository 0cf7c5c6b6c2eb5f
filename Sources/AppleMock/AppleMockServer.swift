import GatewayTLS
import AssertGateCore
import DeviceSim
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Verifier

/// A stand-in for Apple's servers over HTTPS/1.1 (devicecheck.md "The Apple
/// mock"): DeviceCheck's `validate_device_token`, `query_two_bits` and
/// `update_two_bits`, keeping two bits and a month per device, and App
/// Attest's `/v1/attestationData`. It checks the JWT against a public key,
/// and can be told per endpoint to answer otherwise (`script`, `answerAlways`),
/// to be slow (`setLatency`) or to stall. Every request is recorded.
public final class AppleMockServer: Sendable {
    public let port: Int
    let options: AppleMockOptions
    let jwt: AppleMockJWT?
    let untrusted: ReceiptCA?
    let state = NIOLockedValueBox(AppleMockState())
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    public var baseURL: String { "https://127.0.0.1:\(port)" }

    public init(_ options: AppleMockOptions) async throws {
        self.options = options
        self.jwt = try options.jwtPublicKeyPEM.map { AppleMockJWT(key: try P256PublicKey(pem: $0)) }
        self.untrusted = try options.receipts.map { _ in try ReceiptCA(name: "Untrusted Receipt") }
        let tls = try TLSServerContext(
            certificatePath: options.certificatePath, privateKeyPath: options.privateKeyPath, alpn: ["http/1.1"])
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        let box = NIOLockedValueBox<AppleMockServer?>(nil)
        let state = self.state
        let keepAlive = options.keepAlive
        let dropIdle = options.dropIdle
        do {
            self.channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    let number = state.withLockedValue { s -> Int in
                        s.connections += 1
                        return s.connections
                    }
                    return channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(OpenSSLHandler(context: tls))
                        try sync.configureHTTPServerPipeline(withErrorHandling: true)
                        try sync.addHandler(
                            AppleMockHandler(connection: number, keepAlive: keepAlive, dropIdle: dropIdle) { request in
                                guard let server = box.withLockedValue({ $0 }) else { return (.text(503, "starting"), .zero) }
                                return server.respond(request)
                            })
                    }
                }
                .bind(host: options.host, port: options.port).get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        self.port = channel.localAddress?.port ?? 0
        box.withLockedValue { $0 = self }
    }

    public func stop() async throws {
        try? await channel.close()
        try await group.shutdownGracefully()
    }

    // MARK: control (tests; the CLI's /mock/ endpoint calls the same)

    /// The next requests of `endpoint` get these answers, one each.
    public func script(_ answers: [AppleMockAnswer], for endpoint: AppleMockEndpoint) {
        state.withLockedValue { $0.scripts[endpoint, default: []] += answers }
    }

    /// Every request of `endpoint` after its script gets `answer` (`.normal`: as Apple would).
    public func answerAlways(_ answer: AppleMockAnswer, for endpoint: AppleMockEndpoint) {
        state.withLockedValue { $0.standing[endpoint] = answer == .normal ? nil : answer }
    }

    /// Answers of `endpoint` (every endpoint when nil) wait this long.
    public func setLatency(_ latency: TimeAmount, for endpoint: AppleMockEndpoint? = nil) {
        state.withLockedValue { s in
            for e in endpoint.map({ [$0] }) ?? AppleMockEndpoint.allCases { s.latency[e] = latency }
        }
    }

    public func bits(device: String) -> MockDeviceBits? { state.withLockedValue { $0.bits[device] } }

    public func setBits(_ bits: MockDeviceBits?, device: String) { state.withLockedValue { $0.bits[device] = bits } }

    /// The requests seen, oldest first (the newest 10 000).
    public var requests: [AppleMockRequest] { state.withLockedValue { $0.requests } }

    /// Connections accepted so far.
    public var connections: Int { state.withLockedValue { $0.connections } }

    /// Forgets scripts, standing answers, latency, bits and the request log.
    public func reset() {
        state.withLockedValue { s in
            let connections = s.connections
            s = AppleMockState()
            s.connections = connections
        }
    }
}
