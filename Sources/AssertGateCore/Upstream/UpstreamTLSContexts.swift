import Verifier

/// The client TLS contexts of a configuration's `https://` upstreams, by
/// upstream name. Built once per configuration (at start and at each reload)
/// and shared by every worker. Loading a CA file or a client certificate can
/// fail, and that refuses the start or the reload: a request must never find
/// its upstream without the TLS settings it was configured with.
///
/// A reload keeps an upstream's context (and so its kept-alive connections,
/// which the pools compare by context) when its settings and the bytes of
/// its files are unchanged; a changed setting or a file replaced in place
/// gets a new context, and connections made under the old one are retired.
public struct UpstreamTLSContexts: Sendable {
    private struct Entry: Sendable {
        let settings: ClientTLSConfig
        /// SHA-256 over the files' bytes (CA, certificate, key), to notice a
        /// file replaced in place; nil when one could not be read.
        let fingerprint: [UInt8]?
        let context: TLSClientContext
    }
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
            if let old = previous?.byUpstream[name], old.settings == settings, let fingerprint,
                old.fingerprint == fingerprint
            {
                entries[name] = old
                continue
            }
            do {
                let context = try TLSClientContext(
                    caFile: settings.caFile, certificatePath: settings.certificate, privateKeyPath: settings.privateKey)
                entries[name] = Entry(settings: settings, fingerprint: fingerprint, context: context)
            } catch {
                throw LoadError(upstream: name, underlying: error)
            }
        }
        byUpstream = entries
    }

    /// The context for `upstream`'s `https://` endpoints; nil for a cleartext upstream.
    public subscript(upstream: String) -> TLSClientContext? { byUpstream[upstream]?.context }

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
