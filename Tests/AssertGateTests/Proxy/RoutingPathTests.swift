import Testing

@testable import AssertGateCore

@Suite struct RoutingPathTests {
    private func normalized(_ path: String) -> String? {
        RoutingPath.normalized(path[...]).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test(arguments: ["/", "/api/pay", "/api/pay/", "/a.b/c..d/...", "/.well-known/x", "/a/.b", "/a/..c", "*", ""])
    func plainPathsAreLeftAlone(_ path: String) {
        #expect(normalized(path) == nil)
    }

    @Test(arguments: [
        ("/api/../pay", "/pay"),
        ("/x/../api/pay", "/api/pay"),
        ("/api/./pay", "/api/pay"),
        ("/api//pay", "/api/pay"),
        ("//api/pay", "/api/pay"),
        ("/api/pay/.", "/api/pay/"),
        ("/api/pay/..", "/api/"),
        ("/../../api", "/api"),
        ("/%61pi/pay", "/api/pay"),
        ("/api%2Fpay", "/api/pay"),
        ("/api%2fpay", "/api/pay"),
        ("/api%5Cpay", "/api/pay"),
        ("/api\\pay", "/api/pay"),
        ("/api;jsessionid=1/pay", "/api/pay"),
        ("/api/pay;x=%2F..", "/api/"),  // decoded first: the escaped slash splits the parameter
        ("/x/%2e%2e/api/pay", "/api/pay"),
        ("/x/.%2E/api/pay", "/api/pay"),
        ("/api/pay#frag", "/api/pay"),
        ("/a%zz/b", "/a%zz/b"),
        ("/a%4", "/a%4"),
        ("/a%%41", "/a%A"),
        ("/a%2541", "/a%41"),
    ])
    func ambiguousPathsAreReadAsAnUpstreamMight(_ path: String, _ expected: String) {
        #expect(normalized(path) == expected)
    }

    private func snapshot() -> GatewaySnapshot {
        GatewaySnapshot(
            config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [
                RouteConfig(match: RouteMatch(kind: .prefix("/api/")), upstream: "protected", mode: .enforce),
                RouteConfig(match: RouteMatch(kind: .exact("/health")), upstream: "open", mode: .passthrough),
                RouteConfig(match: RouteMatch(kind: .prefix("/static/")), upstream: "open", mode: .passthrough),
            ]))
    }

    private func mode(_ s: GatewaySnapshot, _ method: String, _ path: String) -> String {
        switch s.select(method: method, path: path[...]) {
        case .route(let r): return r.mode.rawValue
        case .noRoute: return "none"
        case .ambiguous: return "ambiguous"
        }
    }

    @Test func aReadingThatSelectsAStricterRouteDecides() {
        let s = snapshot()
        for path in ["/static/../api/pay", "/static/%2e%2e/api/pay", "/%61pi/pay", "/static;x/../api/pay", "/API/pay", "/api"] {
            #expect(mode(s, "POST", path) == "enforce", "\(path)")
        }
        // A laxer reading changes nothing: the raw route stays.
        #expect(mode(s, "GET", "/api/../static/x") == "enforce")
        #expect(mode(s, "GET", "/static/../other") == "passthrough")
        #expect(mode(s, "GET", "/nothing/../else") == "none")
    }

    @Test func readingsThatAgreeKeepTheRoute() {
        let s = snapshot()
        for (path, expected) in [
            ("/api/items/a%2Fb", "enforce"), ("/api//pay", "enforce"), ("/static/img/./logo.png", "passthrough"),
            ("/api/pay", "enforce"), ("/health", "passthrough"), ("/static/app.v2.js", "passthrough"),
        ] {
            #expect(mode(s, "GET", path) == expected, "\(path)")
        }
    }

    /// The routes of deploy/production.yaml's shape: an exact and a prefix
    /// enforced route, a monitored `/api/`, a passthrough rest.
    private func productionLike() -> GatewaySnapshot {
        GatewaySnapshot(
            config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [
                RouteConfig(match: RouteMatch(kind: .prefix("/api/payments"), methods: ["POST"]), upstream: "u", mode: .enforce),
                RouteConfig(match: RouteMatch(kind: .exact("/api/account"), methods: ["GET"]), upstream: "u", mode: .enforce),
                RouteConfig(match: RouteMatch(kind: .prefix("/api/")), upstream: "u", mode: .monitor),
                RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "u", mode: .passthrough),
            ]))
    }

    /// Each of these reaches an enforced handler on some real upstream (Tomcat's
    /// parameters-first order, Apache's NoDecode, double decoding, WHATWG/Envoy
    /// dot removal without merging slashes, a decoded `?` on a re-parsing
    /// server, Express's case-insensitive and slash-tolerant routing) while its
    /// raw bytes select a laxer route: each must get the enforced route.
    @Test(arguments: [
        ("GET", "/api/account;%2Fx"),
        ("POST", "/api/x;%2Fy/../payments"),
        ("POST", "/api/a%2Fb/../../api/payments"),
        ("POST", "/api/x/%252e%252e/payments"),
        ("GET", "/api/account/"),
        ("GET", "/api/account//"),
        ("POST", "/API/payments"),
        ("GET", "/Api/Account"),
        ("POST", "/x;%2Fy/../api/payments"),
        ("POST", "/api/x//../../payments"),
        ("GET", "/api/account%3F"),
        ("GET", "/api/account%253F"),
        ("HEAD", "/api/account"),
    ])
    func readingsOfEveryKnownUpstreamAreEnforced(_ method: String, _ path: String) {
        #expect(mode(productionLike(), method, path) == "enforce", "\(method) \(path)")
    }

    @Test func twoDifferentStrictestRoutesAreAmbiguous() {
        let s = GatewaySnapshot(
            config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [
                RouteConfig(match: RouteMatch(kind: .prefix("/a/")), upstream: "u", mode: .enforce),
                RouteConfig(match: RouteMatch(kind: .prefix("/b/")), upstream: "u", mode: .enforce),
                RouteConfig(match: RouteMatch(kind: .exact("/health")), upstream: "u", mode: .passthrough),
                RouteConfig(match: RouteMatch(kind: .prefix("/")), upstream: "u", mode: .enforce),
            ]))
        #expect(mode(s, "GET", "/a/../b/x") == "ambiguous")
        // A laxer reading of a path already enforced is no reason to refuse it.
        #expect(mode(s, "GET", "/health/") == "enforce")
        #expect(mode(s, "GET", "/Health") == "enforce")
        #expect(mode(s, "GET", "/health") == "passthrough")
    }

    /// `select` skips the other readings when the path as received already
    /// selects the one strictest route: the answers must be those of the full walk.
    @Test func theShortCutGivesTheFullWalksAnswer() {
        func table(_ modes: [PolicyMode]) -> GatewaySnapshot {
            let prefixes = ["/a/", "/b/", "/"]
            return GatewaySnapshot(
                config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: zip(prefixes, modes).map {
                    RouteConfig(match: RouteMatch(kind: .prefix($0.0)), upstream: $0.0, mode: $0.1)
                }))
        }
        // Passthrough only: every path as received.
        let open = table([.passthrough, .passthrough, .passthrough])
        #expect(mode(open, "GET", "/a/../b/x") == "passthrough")
        #expect(open.route(method: "GET", path: "/A/x")?.upstream == "/")
        if case .route(let r) = open.select(method: "GET", path: "/A/x") { #expect(r.upstream == "/") }
        // One enforce route, selected as received: no reading can change it.
        let one = table([.enforce, .monitor, .passthrough])
        #expect(mode(one, "GET", "/a/x") == "enforce")
        // Selected as received but not the strictest: the readings still decide.
        #expect(mode(one, "GET", "/A/x") == "enforce")
        // Two enforce routes: the short cut must not hide the ambiguity.
        let two = table([.enforce, .enforce, .passthrough])
        #expect(mode(two, "GET", "/a/../b/x") == "ambiguous")
    }

    @Test func everydayPathsKeepTheirRoute() {
        let s = productionLike()
        for (method, path, expected) in [
            ("GET", "/api/", "monitor"), ("GET", "/api/items/", "monitor"), ("POST", "/api/payments/", "enforce"),
            ("GET", "/static/", "passthrough"), ("GET", "/", "passthrough"), ("GET", "/api/account", "enforce"),
            ("POST", "/api/payments", "enforce"), ("GET", "/api/items/AbC", "monitor"), ("GET", "/api/items/a;b", "monitor"),
            ("GET", "/api/items/caf%C3%A9", "monitor"), ("GET", "/static/.hidden", "passthrough"),
        ] {
            #expect(mode(s, method, path) == expected, "\(method) \(path)")
        }
    }

    @Test func routeMatchingComparesBytesNotCharacters() {
        // "é" precomposed vs "e" + combining acute: equal as Swift Strings, different on the wire.
        let s = GatewaySnapshot(
            config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [
                RouteConfig(match: RouteMatch(kind: .prefix("/caf\u{E9}/")), upstream: "u", mode: .enforce)
            ]))
        #expect(s.route(method: "GET", path: "/caf\u{E9}/x")?.upstream == "u")
        #expect(s.route(method: "GET", path: "/cafe\u{301}/x") == nil)
    }

    /// `ProxyRequest.path`: the target up to its first `?`, from the
    /// string's bytes; bridged (non-contiguous) strings take the slow path.
    @Test func thePathStopsAtTheFirstQuestionMark() throws {
        let snapshot = GatewaySnapshot(config: GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: []))
        func path(_ target: String) -> String {
            let r = ProxyRequest(
                method: "GET", target: target, authority: nil, scheme: "http", headers: [:], requestId: "r",
                clientAddress: nil, snapshot: snapshot)
            return String(r.path)
        }
        #expect(path("/hello") == "/hello")
        #expect(path("/a/b?x=1?y") == "/a/b")
        #expect(path("?q") == "")
        #expect(path("") == "")
        #expect(path("/caf\u{e9}/\u{1F600}?z") == "/caf\u{e9}/\u{1F600}")
    }

    /// A local route's prefix claims itself and what is below it, nothing else.
    @Test func aPrefixClaimsItselfAndWhatIsBelowIt() {
        let prefix = Array("/app-attest".utf8)
        for claimed in ["/app-attest", "/app-attest/", "/app-attest/challenge", "/app-attest/a/b"] {
            #expect(AttestationRoutes.path(claimed[...], isUnder: prefix), "\(claimed)")
            #expect(AttestationRoutes.path(("x" + claimed).dropFirst(), isUnder: prefix), "a slice: \(claimed)")
        }
        for other in ["/app-attestx", "/app-attes", "/", "", "/other/app-attest", "/APP-ATTEST"] {
            #expect(!AttestationRoutes.path(other[...], isUnder: prefix), "\(other)")
        }
        #expect(AttestationRoutes.path("/"[...], isUnder: Array("/".utf8)))
    }
}
