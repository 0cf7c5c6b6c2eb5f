import NIOCore

/// An immutable, precomputed view of one `GatewayConfig`. Requests keep the
/// snapshot they started on, so a reload never changes a request mid-flight.
public final class GatewaySnapshot: Sendable {
    public let config: GatewayConfig
    /// Lower-cased trust prefix, compared byte-wise on every client header.
    let trustPrefixLower: [UInt8]
    /// `<prefix>Trust`, the header the passthrough gate adds.
    public let trustHeaderName: String
    /// `<prefix>Reason`, read back from a forward decision for metrics and logs.
    let reasonHeaderName: String
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
        self.reasonHeaderName = config.trust.headerPrefix + "Reason"
        let h = config.attestation.headers
        self.assertionHeadersLower = [h.keyId, h.assertion, h.challenge].map { Array($0.lowercased().utf8) }
    }

    /// First match wins; nil when no route matches (→ 404 no-route).
    public func route(method: String, path: Substring) -> RouteConfig? {
        routeIndex(method: method, path: path.utf8).map { config.routes[$0] }
    }

    /// What a request's path selects, read both as received and as an upstream
    /// that normalises paths would read it (`RoutingPath`).
    public enum RouteSelection {
        case route(RouteConfig)
        case noRoute
        /// The two readings select different routes (or one selects none).
        case ambiguous
    }

    public func select(method: String, path: Substring) -> RouteSelection {
        let raw = routeIndex(method: method, path: path.utf8)
        if let normalized = RoutingPath.normalized(path),
            routeIndex(method: method, path: normalized) != raw
        {
            return .ambiguous
        }
        return raw.map { .route(config.routes[$0]) } ?? .noRoute
    }

    /// Byte comparison: an upstream compares bytes, not Unicode characters.
    private func routeIndex<Path: Collection<UInt8>>(method: String, path: Path) -> Int? {
        for (i, route) in config.routes.enumerated() {
            switch route.match.kind {
            case .prefix(let p):
                guard path.starts(with: p.utf8) else { continue }
            case .exact(let e):
                guard path.elementsEqual(e.utf8) else { continue }
            }
            if let methods = route.match.methods, !methods.contains(method) { continue }
            return i
        }
        return nil
    }
}
