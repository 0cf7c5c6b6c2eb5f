/// The client TLS contexts of a configuration's `https://` upstreams, by
/// upstream name. Built once per configuration (at start and at each reload)
/// and shared by every worker. Loading a CA file or a client certificate can
/// fail, and that refuses the start or the reload: a request must never find
/// its upstream without the TLS settings it was configured with.
public struct UpstreamTLSContexts: Sendable {
    private let byUpstream: [String: TLSClientContext]

    public struct LoadError: Error, CustomStringConvertible {
        public let upstream: String
        public let underlying: TLSConfigurationError
        public var description: String { "upstreams.\(upstream).tls: \(underlying)" }
    }

    public static let none = UpstreamTLSContexts(byUpstream: [:])

    private init(byUpstream: [String: TLSClientContext]) {
        self.byUpstream = byUpstream
    }

    public init(config: GatewayConfig) throws(LoadError) {
        var contexts: [String: TLSClientContext] = [:]
        for (name, upstream) in config.upstreams.sorted(by: { $0.key < $1.key })
        where upstream.endpoints.contains(where: \.tls) {
            let files = upstream.tls ?? ClientTLSConfig()
            do {
                contexts[name] = try TLSClientContext(
                    caFile: files.caFile, certificatePath: files.certificate, privateKeyPath: files.privateKey)
            } catch {
                throw LoadError(upstream: name, underlying: error)
            }
        }
        byUpstream = contexts
    }

    /// The context for `upstream`'s `https://` endpoints; nil for a cleartext upstream.
    public subscript(upstream: String) -> TLSClientContext? { byUpstream[upstream] }
}
