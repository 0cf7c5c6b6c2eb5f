import NIOConcurrencyHelpers
import NIOCore

/// An immutable, precomputed view of one `GatewayConfig`. Requests keep the
/// snapshot they started on, so a reload never changes a request mid-flight.
public final class GatewaySnapshot: Sendable {
    public let config: GatewayConfig
    /// Larger in every snapshot made after this one: what is shared across
    /// snapshots (upstream pools, rate limiters) keeps the newest settings
    /// it has seen, whatever the order in which requests on older
    /// snapshots arrive.
    public let generation: UInt64
    private static let generations = NIOLockedValueBox<UInt64>(0)
    /// `config.routes`, each with its upstream resolved (`RouteConfig.resolvedUpstream`).
    private let routes: [RouteConfig]
    /// Lower-cased trust prefix, compared byte-wise on every client header.
    let trustPrefixLower: [UInt8]
    /// `<prefix>Trust`, the header the passthrough gate adds.
    public let trustHeaderName: String
    /// The trust signature's name (`trust.signingSecret` set), lower-cased:
    /// its value is new with every request.
    let trustSignatureLower: [UInt8]?
    /// `attestation.prefix` as bytes: every request's path is compared with it.
    let attestationPrefix: [UInt8]
    /// Renders a forwarded request's typed trust outcome as the headers of
    /// protocol.md §6, signed when `trust.signingSecret` is set.
    public let trustHeaders: TrustHeaderBuilder
    /// Lower-cased names of the three assertion headers and the device token's.
    let assertionHeadersLower: [[UInt8]]
    /// The strictest mode of any route, and whether one route alone has it:
    /// a request whose path selects that route as received needs no other
    /// reading (`select`), which is every request of a passthrough-only table.
    private let strictestRank: Int
    private let strictestIsUnique: Bool
    /// The routes as `routeIndex` reads them, in order: made once per
    /// configuration, so a request compares bytes with bytes (no `String`
    /// view walked per route, no route copied to read its mode).
    private let matchers: [Matcher]

    private struct Matcher: Sendable {
        let pattern: [UInt8]
        let isPrefix: Bool
        /// Upper-case; nil: any method.
        let methods: Set<String>?
        let rank: Int
    }

    /// Verifier, trust anchors and trust-header signer of this configuration
    /// (always there in a snapshot `build` made; nil only in tests that need none).
    public let enforcement: EnforcementContext?
    /// TLS of the `https://` upstreams.
    public let upstreamTLS: UpstreamTLSContexts

    /// Everything a configuration needs at run time, made in one place: the
    /// enforcement context (trust anchors read and parsed once) and the
    /// upstream TLS contexts (those whose settings and files did not change
    /// since `previous` are kept, with their connections). Every file is
    /// tried, and all that fail are named in the error, so `check-config`
    /// can list them; nothing half-built comes out.
    public static func build(config: GatewayConfig, previous: GatewaySnapshot? = nil) throws(BuildError)
        -> GatewaySnapshot
    {
        var failures: [any Error] = []
        var enforcement: EnforcementContext?
        var upstreamTLS: UpstreamTLSContexts?
        do {
            // Whether receipts are refreshed is fixed at start: a reload keeps it.
            enforcement = try EnforcementContext(
                config: config, refreshesReceipts: previous?.enforcement?.refreshesReceipts)
        } catch {
            failures.append(error)
        }
        do {
            upstreamTLS = try UpstreamTLSContexts(config: config, reusing: previous?.upstreamTLS)
        } catch {
            failures.append(error)
        }
        guard failures.isEmpty, let enforcement, let upstreamTLS else { throw BuildError(failures: failures) }
        return GatewaySnapshot(config: config, enforcement: enforcement, upstreamTLS: upstreamTLS)
    }

    /// What `build` could not load, each failure naming its file or setting.
    public struct BuildError: Error, CustomStringConvertible {
        public let failures: [any Error]
        public var description: String { failures.map { "\($0)" }.joined(separator: "\n") }
    }

    /// A snapshot of what the caller already has (`build` makes the real
    /// ones): tests pass only what they exercise.
    init(config: GatewayConfig, enforcement: EnforcementContext? = nil, upstreamTLS: UpstreamTLSContexts = .none) {
        self.config = config
        let generation = Self.generations.withLockedValue { g -> UInt64 in
            g += 1
            return g
        }
        self.generation = generation
        self.routes = config.routes.map { route in
            var r = route
            r.resolvedUpstream = config.upstreams[route.upstream].map {
                ResolvedUpstream(config: $0, tls: upstreamTLS[route.upstream], generation: generation)
            }
            return r
        }
        self.enforcement = enforcement
        self.upstreamTLS = upstreamTLS
        self.trustPrefixLower = Array(config.trust.headerPrefix.lowercased().utf8)
        self.trustHeaderName = config.trust.headerPrefix + "Trust"
        self.attestationPrefix = Array(config.attestation.prefix.utf8)
        self.trustHeaders = TrustHeaderBuilder(
            prefix: config.trust.headerPrefix, signingSecret: config.trust.signingSecret?.value)
        self.trustSignatureLower = trustHeaders.signatureHeaderName.map { Array($0.lowercased().utf8) }
        let h = config.attestation.headers
        // The device token goes with them (risk.md §6.7).
        self.assertionHeadersLower = [h.keyId, h.assertion, h.challenge, h.deviceToken].map { Array($0.lowercased().utf8) }
        let ranks = config.routes.map { Self.rank($0.mode) }
        self.matchers = config.routes.map { route in
            let (pattern, isPrefix): (String, Bool) =
                switch route.match.kind {
                case .prefix(let p): (p, true)
                case .exact(let e): (e, false)
                }
            return Matcher(pattern: Array(pattern.utf8), isPrefix: isPrefix, methods: route.match.methods, rank: Self.rank(route.mode))
        }
        let strictest = ranks.max() ?? -1
        self.strictestRank = strictest
        self.strictestIsUnique = ranks.filter { $0 == strictest }.count == 1
    }

    private static func rank(_ mode: PolicyMode) -> Int {
        switch mode {
        case .passthrough: return 0
        case .monitor: return 1
        case .enforce: return 2
        }
    }

    /// First match wins; nil when no route matches (→ 404 no-route).
    public func route(method: String, path: Substring) -> RouteConfig? {
        routeIndex(method: method, path: path.utf8).map { routes[$0] }
    }

    /// What a request's path selects, read as received and as upstream servers
    /// might read it (`RoutingPath`, plus letter case and a trailing slash
    /// taken off or added).
    public enum RouteSelection {
        case route(RouteConfig)
        case noRoute
        /// Two readings select different routes of the same, strictest mode.
        case ambiguous
    }

    /// The strictest route any reading selects: a reading that lands on a laxer
    /// route (or none) cannot help an attacker, one that lands on a stricter
    /// route decides. Two different routes at the strictest level (two
    /// `enforce` routes with their own settings) cannot be told apart: refused.
    public func select(method: String, path: Substring) -> RouteSelection {
        let raw = routeIndex(method: method, path: path.utf8)
        func rank(_ i: Int?) -> Int { i.map { matchers[$0].rank } ?? -1 }
        // Nothing can outrank the strictest mode, and two routes can only be
        // ambiguous above passthrough: the other readings cannot change this.
        if let raw, rank(raw) == strictestRank, strictestRank == 0 || strictestIsUnique {
            return .route(routes[raw])
        }
        var best = raw
        var ambiguous = false
        func weigh(_ i: Int?) {
            if rank(i) > rank(best) {
                best = i
                ambiguous = false
            } else if rank(i) == rank(best), i != best, rank(best) > 0 {
                ambiguous = true
            }
        }
        func consider<P: Collection<UInt8>>(_ p: P) {
            weigh(routeIndex(method: method, path: p, slashTolerant: true))
            weigh(routeIndex(method: method, path: p, ignoringCase: true, slashTolerant: true))
        }
        func considerWithTrimmed<P: BidirectionalCollection<UInt8>>(_ p: P) {
            consider(p)
            var trimmed = p[...]
            while trimmed.count > 1, trimmed.last == UInt8(ascii: "/") { trimmed = trimmed.dropLast() }
            if trimmed.count != p.count { consider(trimmed) }
        }
        considerWithTrimmed(path.utf8)
        for reading in RoutingPath.readings(path) { considerWithTrimmed(reading) }
        if ambiguous { return .ambiguous }
        return best.map { .route(routes[$0]) } ?? .noRoute
    }

    /// Byte comparison: an upstream compares bytes, not Unicode characters.
    /// HEAD matches a route that lists GET: servers answer it with the GET handler.
    /// `slashTolerant`: read as a server that does not care about one trailing
    /// slash: a route that ends in `/` also takes the path bare (`/x/` takes
    /// `/x`; exact `/x/` takes `/x`), as a servlet on `/x/*` serves `/x`.
    private func routeIndex<Path: Collection<UInt8>>(
        method: String, path: Path, ignoringCase: Bool = false, slashTolerant: Bool = false
    ) -> Int? {
        // Every path here is a String's UTF-8 or an array: contiguous.
        if let found = path.withContiguousStorageIfAvailable({
            routeIndex(method: method, bytes: $0, ignoringCase: ignoringCase, slashTolerant: slashTolerant)
        }) {
            return found
        }
        return Array(path).withUnsafeBufferPointer {
            routeIndex(method: method, bytes: $0, ignoringCase: ignoringCase, slashTolerant: slashTolerant)
        }
    }

    private func routeIndex(
        method: String, bytes path: UnsafeBufferPointer<UInt8>, ignoringCase: Bool, slashTolerant: Bool
    ) -> Int? {
        for (i, m) in matchers.enumerated() {
            let matched = m.pattern.withUnsafeBufferPointer { pattern -> Bool in
                let n = pattern.count
                if m.isPrefix ? path.count >= n : path.count == n,
                    Self.equal(path, pattern, count: n, ignoringCase: ignoringCase)
                {
                    return true
                }
                return slashTolerant && n > 1 && pattern[n - 1] == UInt8(ascii: "/") && path.count == n - 1
                    && Self.equal(path, pattern, count: n - 1, ignoringCase: ignoringCase)
            }
            guard matched else { continue }
            if let methods = m.methods, !methods.contains(method), !(method == "HEAD" && methods.contains("GET")) {
                continue
            }
            return i
        }
        return nil
    }

    /// The first `count` bytes of `a` and `b` (both have at least that many).
    private static func equal(
        _ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>, count: Int, ignoringCase: Bool
    ) -> Bool {
        var i = 0
        if ignoringCase {
            while i < count {
                if ASCII.lower(a[i]) != ASCII.lower(b[i]) { return false }
                i += 1
            }
        } else {
            while i < count {
                if a[i] != b[i] { return false }
                i += 1
            }
        }
        return true
    }
}

/// A route's upstream as one snapshot has it: its config and its TLS client
/// context, shared by every request the route selects (one reference to
/// copy, no lookup by name).
final class ResolvedUpstream: Sendable {
    let config: UpstreamConfig
    let tls: UpstreamTLS?
    /// The snapshot's (`GatewaySnapshot.generation`).
    let generation: UInt64

    init(config: UpstreamConfig, tls: UpstreamTLS?, generation: UInt64) {
        self.config = config
        self.tls = tls
        self.generation = generation
    }
}

/// Which configuration something shared across snapshots keeps (an
/// endpoint pool, the challenge rate limiter): the newest it was given. A
/// request keeps the snapshot it started on and may arrive long after a
/// reload (a bound body, a store call, a retry); its older settings must not
/// come back.
struct ConfigGeneration: Sendable {
    private var generation: UInt64 = 0
    private var adopted = false

    /// Whether settings from snapshot `offered` replace the ones kept: the
    /// first, a newer one's, or one that names none (0, tests). The same
    /// generation again (every request between reloads) changes, and copies,
    /// nothing.
    mutating func takes(_ offered: UInt64) -> Bool {
        guard offered > generation || offered == 0 || !adopted else { return false }
        adopted = true
        generation = offered
        return true
    }
}
