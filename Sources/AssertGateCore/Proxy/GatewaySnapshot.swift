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
        // Letter case: Express (and IIS) match paths without regard to it.
        if routeIndex(method: method, path: path.utf8, ignoringCase: true) != raw { return .ambiguous }
        for reading in RoutingPath.readings(path) {
            let p = reading.path
            let t = reading.trimmed
            if routeIndex(method: method, path: p, slashTolerant: t) != raw
                || routeIndex(method: method, path: p, ignoringCase: true, slashTolerant: t) != raw
            {
                return .ambiguous
            }
        }
        return raw.map { .route(config.routes[$0]) } ?? .noRoute
    }

    /// Byte comparison: an upstream compares bytes, not Unicode characters.
    /// HEAD matches a route that lists GET: servers answer it with the GET handler.
    /// `slashTolerant`: `path` had its trailing slash taken off, so a route that
    /// ends in `/` also takes it bare (`/x/` takes `/x`; exact `/x/` takes `/x`).
    private func routeIndex<Path: Collection<UInt8>>(
        method: String, path: Path, ignoringCase: Bool = false, slashTolerant: Bool = false
    ) -> Int? {
        func same<P: Collection<UInt8>>(_ a: P, _ b: String.UTF8View.SubSequence) -> Bool {
            a.count == b.count && (ignoringCase ? zip(a, b).allSatisfy { ASCII.lower($0) == ASCII.lower($1) } : a.elementsEqual(b))
        }
        for (i, route) in config.routes.enumerated() {
            let pattern: String
            let isPrefix: Bool
            switch route.match.kind {
            case .prefix(let p): (pattern, isPrefix) = (p, true)
            case .exact(let e): (pattern, isPrefix) = (e, false)
            }
            let full = pattern.utf8[...]
            var matched = isPrefix ? path.count >= full.count && same(path.prefix(full.count), full) : same(path, full)
            if !matched, slashTolerant, full.count > 1, full.last == UInt8(ascii: "/") {
                matched = same(path, full.dropLast())
            }
            guard matched else { continue }
            if let methods = route.match.methods, !methods.contains(method),
                !(method == "HEAD" && methods.contains("GET"))
            {
                continue
            }
            return i
        }
        return nil
    }
}
