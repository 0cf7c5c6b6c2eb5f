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

    @Test func aPathWhoseReadingsSelectDifferentRoutesIsAmbiguous() {
        let s = snapshot()
        for path in ["/static/../api/pay", "/static/%2e%2e/api/pay", "/%61pi/pay", "/static;x/../api/pay", "/api/../static/x"] {
            guard case .ambiguous = s.select(method: "POST", path: path[...]) else {
                Issue.record("\(path) was not refused as ambiguous")
                continue
            }
        }
        // Normalised to nothing a route serves, while the raw path is served.
        guard case .ambiguous = s.select(method: "GET", path: "/static/../other") else {
            Issue.record("/static/../other was not ambiguous")
            return
        }
    }

    @Test func aPathWhoseReadingsAgreeKeepsItsRoute() {
        let s = snapshot()
        let cases: [(String, String?)] = [
            ("/api/items/a%2Fb", "protected"),
            ("/api//pay", "protected"),
            ("/static/img/./logo.png", "open"),
            ("/api/pay", "protected"),
            ("/health", "open"),
            ("/nothing/../else", nil),
        ]
        for (path, upstream) in cases {
            switch s.select(method: "GET", path: path[...]) {
            case .route(let r): #expect(r.upstream == upstream, "\(path)")
            case .noRoute: #expect(upstream == nil, "\(path)")
            case .ambiguous: Issue.record("\(path) was refused as ambiguous")
            }
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
    /// parameters-first order, Apache's NoDecode, double decoding, Express's
    /// case-insensitive and slash-tolerant routing) while its raw bytes select a
    /// laxer route: every one must be refused.
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
    ])
    func readingsOfEveryKnownUpstreamAgree(_ method: String, _ path: String) {
        guard case .ambiguous = productionLike().select(method: method, path: path[...]) else {
            Issue.record("\(method) \(path) was not refused")
            return
        }
    }

    @Test func headMatchesARouteThatListsGet() {
        let s = productionLike()
        guard case .route(let r) = s.select(method: "HEAD", path: "/api/account") else {
            Issue.record("HEAD /api/account did not select a route")
            return
        }
        #expect(r.mode == .enforce)
    }

    @Test func everydayPathsKeepTheirRoute() {
        let s = productionLike()
        for (method, path, mode) in [
            ("GET", "/api/", PolicyMode.monitor), ("GET", "/api/items/", .monitor), ("POST", "/api/payments/", .enforce),
            ("GET", "/static/", .passthrough), ("GET", "/", .passthrough), ("GET", "/api/account", .enforce),
            ("POST", "/api/payments", .enforce),
        ] {
            guard case .route(let r) = s.select(method: method, path: path[...]) else {
                Issue.record("\(method) \(path) did not select a route")
                continue
            }
            #expect(r.mode == mode, "\(method) \(path)")
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
}
