import NIOCore

/// An immutable, precomputed view of one `GatewayConfig`. Requests keep the
/// snapshot they started on, so a reload never changes a request mid-flight.
public final class GatewaySnapshot: Sendable {
    public let config: GatewayConfig
    /// Lower-cased trust prefix, compared byte-wise on every client header.
    let trustPrefixLower: [UInt8]
    /// `<prefix>Trust`, the header the passthrough gate adds.
    public let trustHeaderName: String
    /// Lower-cased names of the three assertion headers.
    let assertionHeadersLower: [[UInt8]]

    /// Verifier, trust anchors and trust-header signer of this configuration;
    /// nil only when its trust anchors could not be loaded (serve refuses such
    /// a file before it gets here).
    public let enforcement: EnforcementContext?

    public init(config: GatewayConfig, enforcement: EnforcementContext? = nil) {
        self.config = config
        self.enforcement = enforcement ?? (try? EnforcementContext(config: config))
        self.trustPrefixLower = Array(config.trust.headerPrefix.lowercased().utf8)
        self.trustHeaderName = config.trust.headerPrefix + "Trust"
        let h = config.attestation.headers
        self.assertionHeadersLower = [h.keyId, h.assertion, h.challenge].map { Array($0.lowercased().utf8) }
    }

    /// First match wins; nil when no route matches (→ 404 no-route).
    public func route(method: String, path: Substring) -> RouteConfig? {
        for route in config.routes {
            switch route.match.kind {
            case .prefix(let p):
                guard path.hasPrefix(p) else { continue }
            case .exact(let e):
                guard path == e else { continue }
            }
            if let methods = route.match.methods, !methods.contains(method) { continue }
            return route
        }
        return nil
    }
}
