import GatewayTLS
import NIOCore
import NIOConcurrencyHelpers
import Verifier

/// What an `https://` upstream's connections are made with. `generation`
/// grows with every context built, so a pool can tell newer settings from
/// older ones: requests still running on the configuration before a reload
/// must not switch it back.
public struct UpstreamTLS: Sendable {
    public let context: TLSClientContext
    /// The name the certificate must carry; nil = each endpoint's host.
    public let serverName: String?
    public let generation: UInt64

    init(context: TLSClientContext, serverName: String?, generation: UInt64) {
        self.context = context
        self.serverName = serverName
        self.generation = generation
    }
}

/// The client TLS contexts of a configuration's `https://` upstreams, by
/// upstream name. Built once per configuration (at start and at each reload)
/// and shared by every worker. Loading a CA file or a client certificate can
/// fail, and that refuses the start or the reload: a request must never find
/// its upstream without the TLS settings it was configured with.
///
/// A reload keeps an upstream's context (and so its kept-alive connections,
/// which the pools compare by generation) when its settings and the bytes of
/// its files are unchanged; a changed setting or a file replaced in place
/// gets a new context, and connections made under the old one are retired.
public struct UpstreamTLSContexts: Sendable {
    private struct Entry: Sendable {
        let settings: ClientTLSConfig
        /// SHA-256 over the files' bytes (CA, certificate, key), to notice a
        /// file replaced in place; nil when one could not be read.
        let fingerprint: [UInt8]?
        /// Offers ALPN `h2` (an `h2://` upstream).
        let http2: Bool
        let tls: UpstreamTLS
    }
    private static let generations = NIOLockedValueBox<UInt64>(0)
    private let byUpstream: [String: Entry]

    public struct LoadError: Error, CustomStringConvertible {
        public let upstream: String
        public let underlying: TLSConfigurationError
        public var description: String { "upstreams.\(upstream).tls: \(underlying)" }
    }

    public static let none = UpstreamTLSContexts(byUpstream: [:])

    private init(byUpstream: [String: Entry]) {
        self.byUpstream = byUpstream
    }

    /// `previous`: the contexts in force, reused where nothing changed.
    public init(config: GatewayConfig, reusing previous: UpstreamTLSContexts? = nil) throws(LoadError) {
        var entries: [String: Entry] = [:]
        for (name, upstream) in config.upstreams.sorted(by: { $0.key < $1.key })
        where upstream.endpoints.contains(where: \.tls) {
            let settings = upstream.tls ?? ClientTLSConfig()
            let fingerprint = Self.fingerprint(settings)
            if let old = previous?.byUpstream[name], old.settings == settings, old.http2 == upstream.isHTTP2,
                let fingerprint, old.fingerprint == fingerprint
            {
                entries[name] = old
                continue
            }
            do {
                let context = try TLSClientContext(
                    caFile: settings.caFile, certificatePath: settings.certificate, privateKeyPath: settings.privateKey,
                    alpn: upstream.isHTTP2 ? ["h2"] : [])
                let generation = Self.generations.withLockedValue { g -> UInt64 in
                    g += 1
                    return g
                }
                let tls = UpstreamTLS(context: context, serverName: settings.serverName, generation: generation)
                entries[name] = Entry(settings: settings, fingerprint: fingerprint, http2: upstream.isHTTP2, tls: tls)
            } catch {
                throw LoadError(upstream: name, underlying: error)
            }
        }
        byUpstream = entries
    }

    /// How `upstream`'s `https://` endpoints are reached; nil for a cleartext upstream.
    public subscript(upstream: String) -> UpstreamTLS? { byUpstream[upstream]?.tls }

    private static func fingerprint(_ settings: ClientTLSConfig) -> [UInt8]? {
        var all: [UInt8] = []
        for path in [settings.caFile, settings.certificate, settings.privateKey] {
            guard let path else {
                all.append(0)
                continue
            }
            guard case .success(let bytes) = ConfigFiles.read(path, limit: 1 << 20) else { return nil }
            // Length-prefixed, so moving bytes from one file to the next changes the digest.
            all.append(contentsOf: withUnsafeBytes(of: UInt64(bytes.count).bigEndian, Array.init))
            all.append(contentsOf: bytes)
        }
        return SHA256.hash(all)
    }
}

extension UpstreamTLS {
    /// The client handshake of the TLS handler an upstream connect installed
    /// (nil: none was, which fails the connect). TCP and TLS together get
    /// `connectTimeout`, as a cleartext connect does.
    static func handshake(_ handler: OpenSSLHandler?, on channel: Channel, deadline: NIODeadline) -> EventLoopFuture<Void> {
        guard let handler else {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(TLSClientHandshakeError(reason: "no handshake started", timedOut: false))
        }
        return handler.clientHandshake(on: channel, deadline: deadline)
    }
}
