import AssertGateRedis
import NIOCore
import Yams

/// The section-by-section parse. Each section falls back to its default when
/// invalid so later cross-checks still run and report their own problems.
struct ConfigSectionParser {
    let reader: ConfigReader
    let environment: [String: String]
    let baseDirectory: String?

    func parse(_ root: Node) -> GatewayConfig? {
        guard let top = reader.mapping(root, path: "", section: .top) else { return nil }
        var listeners = parseListeners(top)
        let admin = top["admin"].map(parseAdmin) ?? AdminConfig()
        let apps = parseApps(top)
        let trust = top["trust"].map(parseTrust) ?? TrustConfig()
        let attestation = parseAttestation(top["attestation"], trustPrefix: trust.headerPrefix, top: top)
        let store = top["store"].map(parseStore) ?? .memory
        let upstreams = parseUpstreams(top)
        let limits = top["limits"].map(parseLimits) ?? LimitsConfig()
        let routes = parseRoutes(top, upstreams: upstreams, limits: limits)
        let fraudMetric = top["fraudMetric"].flatMap(parseFraudMetric)
        let deviceCheck = top["deviceCheck"].flatMap { parseDeviceCheck($0, fraudMetric: fraudMetric, top: top) }
        let logging = top["logging"].map(parseLogging) ?? LoggingConfig()
        if top["deviceCheck"] == nil, let routes, let i = routes.firstIndex(where: { $0.deviceCheck != .none }) {
            reader.error(
                itemLine(top, "routes", i, key: "deviceCheck"),
                "routes[\(i)].deviceCheck: needs the top-level deviceCheck: section (Apple's key; `deviceCheck: {}` takes fraudMetric's)")
        }
        resolveIdleTimeouts(&listeners, upstreams: upstreams ?? [:], routes: routes ?? [], limits: limits, top: top)
        crossCheck(listeners: listeners, admin: admin, top: top)
        guard let upstreams, let routes else { return nil }
        return GatewayConfig(
            listeners: listeners, admin: admin, apps: apps, attestation: attestation, store: store, trust: trust,
            upstreams: upstreams, routes: routes, limits: limits, fraudMetric: fraudMetric,
            deviceCheck: deviceCheck, logging: logging)
    }

    // MARK: listeners, admin

    func parseListeners(_ top: ConfigReader.MappingView) -> [ListenerConfig] {
        guard let node = reader.required(top, "listeners"), let items = reader.sequence(node, path: "listeners") else {
            return []
        }
        if items.isEmpty { reader.error(at: node, "listeners: at least one listener is required") }
        var result: [ListenerConfig] = []
        var seen: [(address: HostPort, index: Int)] = []
        for (i, item) in items.enumerated() {
            let path = "listeners[\(i)]"
            guard let view = reader.mapping(item, path: path, section: .listener) else { continue }
            guard let address = address(view, "address", required: true) else { continue }
            // Caught here rather than by serve's bind failing (check-config passed).
            if let first = seen.first(where: { $0.address.overlaps(address) }) {
                reader.error(
                    at: view["address"],
                    "\(path).address: \(address) overlaps listeners[\(first.index)] (\(first.address)): both cannot be bound")
            }
            seen.append((address, i))
            var tls: TLSConfig?
            if let tlsNode = view["tls"],
                let tv = reader.mapping(tlsNode, path: "\(path).tls", section: .listenerTLS)
            {
                let cert = pemFile(tv, "certificate", label: "CERTIFICATE")
                let key = pemFile(tv, "privateKey", label: "PRIVATE KEY")
                if let cert, let key { tls = TLSConfig(certificate: cert, privateKey: key) }
            }
            var listener = ListenerConfig(address: address, tls: tls)
            if let t = reader.duration(view, "handshakeTimeout") { listener.handshakeTimeout = t }
            if let t = reader.duration(view, "headerTimeout") { listener.headerTimeout = t }
            listener.idleTimeout = reader.duration(view, "idleTimeout")
            result.append(listener)
        }
        return result
    }

    func address(_ view: ConfigReader.MappingView, _ key: String, required: Bool) -> HostPort? {
        guard let text = reader.string(view, key, required: required), let node = view[key] else { return nil }
        switch ConfigSyntax.hostPort(text) {
        case .success(let hp): return hp
        case .failure(let e):
            reader.error(at: node, "\(view.path(key)): \(e.message)")
            return nil
        }
    }

    /// An outbound connection's `tls` mapping: `caFile`, a client
    /// `certificate` with its `privateKey`, `serverName`.
    func clientTLS(_ node: Node, path: String) -> ClientTLSConfig? {
        guard let tv = reader.mapping(node, path: path, section: .clientTLS)
        else { return nil }
        var tls = ClientTLSConfig()
        tls.caFile = pemFile(tv, "caFile", label: "CERTIFICATE", required: false)
        tls.certificate = pemFile(tv, "certificate", label: "CERTIFICATE", required: false)
        tls.privateKey = pemFile(tv, "privateKey", label: "PRIVATE KEY", required: false)
        if (tv["certificate"] == nil) != (tv["privateKey"] == nil) {
            reader.error(tv.line, "\(path): give both 'certificate' and 'privateKey' (a client certificate), or neither")
        }
        if let name = reader.string(tv, "serverName"), let nnode = tv["serverName"] {
            // A DNS name, an IPv4 address or a bare IPv6 address: no brackets, no port.
            let bad = name.isEmpty || name.utf8.count > 253
                || name.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F || "/[]".utf8.contains($0) })
                || (name.contains(":") && !ConfigSyntax.isIPv6(name))
            if bad {
                reader.error(at: nnode, "\(path).serverName: '\(name)' is not a host name or IP address (no brackets or port)")
            } else {
                tls.serverName = name
            }
        }
        return tls
    }

    func pemFile(_ view: ConfigReader.MappingView, _ key: String, label: String, required: Bool = true) -> String? {
        guard let path = reader.string(view, key, required: required), let node = view[key] else { return nil }
        let resolved = ConfigFiles.resolve(path, base: baseDirectory)
        if let e = ConfigFiles.checkPEM(resolved, label: label) {
            reader.error(at: node, "\(view.path(key)): \(e.message)")
            return nil
        }
        return resolved
    }

    func parseAdmin(_ node: Node) -> AdminConfig {
        var admin = AdminConfig()
        guard let view = reader.mapping(node, path: "admin", section: .admin) else { return admin }
        if let address = address(view, "address", required: false) { admin.address = address }
        admin.token = secret(view, "token")
        return admin
    }

    // MARK: secrets

    func secret(_ view: ConfigReader.MappingView, _ key: String, required isRequired: Bool = false) -> Secret? {
        guard let node = isRequired ? reader.required(view, key) : view[key] else { return nil }
        let path = view.path(key)
        switch node {
        case .scalar(let s):
            guard !s.string.isEmpty else {
                reader.error(at: node, "\(path): must not be empty")
                return nil
            }
            return Secret(source: .inline, value: s.string)
        case .mapping:
            guard let sv = reader.mapping(node, path: path, section: .secret) else { return nil }
            guard sv.entries.count == 1 else {
                reader.error(sv.line, "\(path): give exactly one of 'file' or 'env' (or an inline string)")
                return nil
            }
            if let file = reader.string(sv, "file"), let fileNode = sv["file"] {
                let resolved = ConfigFiles.resolve(file, base: baseDirectory)
                switch ConfigFiles.read(resolved, limit: ConfigLoader.maxSecretBytes) {
                case .failure(let e):
                    reader.error(at: fileNode, "\(path).file: \(e.message)")
                    return nil
                case .success(let bytes):
                    guard var text = String(validating: bytes, as: UTF8.self) else {
                        reader.error(at: fileNode, "\(path).file: '\(resolved)' is not UTF-8 text")
                        return nil
                    }
                    while text.hasSuffix("\n") || text.hasSuffix("\r") || text.hasSuffix("\r\n") { text.removeLast() }
                    guard !text.isEmpty else {
                        reader.error(at: fileNode, "\(path).file: '\(resolved)' is empty")
                        return nil
                    }
                    return Secret(source: .file(resolved), value: text)
                }
            }
            if let name = reader.string(sv, "env"), let envNode = sv["env"] {
                guard let value = environment[name] else {
                    reader.error(at: envNode, "\(path).env: environment variable \(name) is not set")
                    return nil
                }
                guard !value.isEmpty else {
                    reader.error(at: envNode, "\(path).env: environment variable \(name) is empty")
                    return nil
                }
                return Secret(source: .env(name), value: value)
            }
            return nil
        default:
            reader.error(at: node, "\(path): expected a string, {file: PATH} or {env: NAME}, got \(reader.kind(node))")
            return nil
        }
    }

    // MARK: apps, attestation

    func parseApps(_ top: ConfigReader.MappingView) -> [AppConfig] {
        guard let node = reader.required(top, "apps"), let items = reader.sequence(node, path: "apps") else { return [] }
        if items.isEmpty { reader.error(at: node, "apps: at least one app is required") }
        var result: [AppConfig] = []
        var seen: [String: Int] = [:]
        for (i, item) in items.enumerated() {
            let path = "apps[\(i)]"
            guard let view = reader.mapping(item, path: path, section: .app) else { continue }
            var appId = reader.string(view, "appId", required: true)
            if let id = appId, let idNode = view["appId"] {
                if let e = ConfigSyntax.appId(id) {
                    reader.error(at: idNode, "\(path).appId: \(e.message)")
                    appId = nil
                } else if let first = seen[id] {
                    reader.error(at: idNode, "\(path).appId: '\(id)' is already listed as apps[\(first)]")
                }
                seen[id] = seen[id] ?? i
            }
            var envs: Set<AppEnvironment> = [.production]
            if let envNode = view["environments"], let list = reader.sequence(envNode, path: "\(path).environments") {
                envs = []
                if list.isEmpty { reader.error(at: envNode, "\(path).environments: must not be empty") }
                for (j, e) in list.enumerated() {
                    let ep = "\(path).environments[\(j)]"
                    guard let text = reader.scalarString(e, path: ep) else { continue }
                    guard let env = AppEnvironment(rawValue: text) else {
                        reader.error(at: e, "\(ep): expected production or development, got '\(text)'")
                        continue
                    }
                    envs.insert(env)
                }
            }
            let rules = view["rules"].flatMap { parseRules($0, path: "\(path).rules", routeLevel: false) }
            if let appId { result.append(AppConfig(appId: appId, environments: envs, rules: rules ?? RulesConfig())) }
        }
        return result
    }

    func parseAttestation(_ node: Node?, trustPrefix: String, top: ConfigReader.MappingView) -> AttestationConfig {
        var a = AttestationConfig()
        // Default header names must not fall under a custom trust prefix either.
        let prefix = trustPrefix.lowercased()
        let explicit = node.flatMap { n -> Set<String>? in
            guard case .mapping(let m) = n, case .mapping(let h)? = m["headers"] else { return nil }
            return Set(h.keys.compactMap(\.string))
        } ?? []
        for (key, name) in [
            ("keyId", a.headers.keyId), ("assertion", a.headers.assertion), ("challenge", a.headers.challenge),
            ("deviceToken", a.headers.deviceToken),
        ]
        where !explicit.contains(key) && name.lowercased().hasPrefix(prefix) {
            reader.error(top.entries["trust"]?.key.mark?.line,
                "trust.headerPrefix: '\(trustPrefix)' would strip the header \(name); rename attestation.headers.\(key)")
        }
        guard let node else { return a }
        guard let view = reader.mapping(node, path: "attestation", section: .attestation) else { return a }
        if let prefix = reader.string(view, "prefix"), let pnode = view["prefix"] {
            if let e = ConfigSyntax.path(prefix) {
                reader.error(at: pnode, "attestation.prefix: \(e.message)")
            } else if prefix.hasSuffix("/") {
                reader.error(at: pnode, "attestation.prefix: '\(prefix)' must not end with '/'")
            } else {
                a.prefix = prefix
            }
        }
        if let ttl = reader.duration(view, "challengeTTL") { a.challengeTTL = ttl }
        if let rate = view["challengeRate"].flatMap({ rateConfig($0, path: "attestation.challengeRate") }) {
            a.challengeRate = rate
        }
        a.rampUp = view["rampUp"].flatMap { rateConfig($0, path: "attestation.rampUp") }
        a.trustAnchors = pemList(view, "trustAnchors")
        a.receiptTrustAnchors = pemList(view, "receiptTrustAnchors")
        if let skew = reader.duration(view, "clockSkew", allowZero: true) { a.clockSkew = skew }
        if let hnode = view["headers"],
            let hv = reader.mapping(hnode, path: "attestation.headers", section: .assertionHeaders)
        {
            var seen: [String: String] = [:]
            for key in ["keyId", "assertion", "challenge", "deviceToken"] {
                guard let name = reader.string(hv, key), let n = hv[key] else { continue }
                guard ConfigSyntax.isToken(name) else {
                    reader.error(at: n, "attestation.headers.\(key): '\(name)' is not a valid header name")
                    continue
                }
                if name.lowercased().hasPrefix(trustPrefix.lowercased()) {
                    reader.error(at: n, "attestation.headers.\(key): '\(name)' starts with trust.headerPrefix '\(trustPrefix)' and would be stripped")
                    continue
                }
                if let other = seen[name.lowercased()] {
                    reader.error(at: n, "attestation.headers.\(key): '\(name)' is also the \(other) header")
                    continue
                }
                seen[name.lowercased()] = key
                switch key {
                case "keyId": a.headers.keyId = name
                case "assertion": a.headers.assertion = name
                case "deviceToken": a.headers.deviceToken = name
                default: a.headers.challenge = name
                }
            }
        }
        return a
    }

    func pemList(_ view: ConfigReader.MappingView, _ key: String) -> [String] {
        guard let node = view[key], let list = reader.sequence(node, path: view.path(key)) else { return [] }
        var out: [String] = []
        for (i, item) in list.enumerated() {
            let p = "\(view.path(key))[\(i)]"
            guard let path = reader.scalarString(item, path: p) else { continue }
            let resolved = ConfigFiles.resolve(path, base: baseDirectory)
            if let e = ConfigFiles.checkPEM(resolved, label: "CERTIFICATE") {
                reader.error(at: item, "\(p): \(e.message)")
                continue
            }
            out.append(resolved)
        }
        return out
    }

    func rateConfig(_ node: Node, path: String) -> RateConfig? {
        guard let view = reader.mapping(node, path: path, section: .rate) else { return nil }
        let perSecond =
            reader.required(view, "perSecond") != nil
            ? reader.number(view, "perSecond", greaterThanZero: true, min: ConfigReader.minRate) : nil
        let burst = reader.required(view, "burst") != nil ? reader.int(view, "burst", min: 1, max: Int(ConfigReader.maxNumber)) : nil
        guard let perSecond, let burst else { return nil }
        return RateConfig(perSecond: perSecond, burst: burst)
    }

    // MARK: store, trust

    func parseStore(_ node: Node) -> StoreConfig {
        guard let view = reader.mapping(node, path: "store", section: .store) else { return .memory }
        let given = ["redis", "memory"].filter { view.entries[$0] != nil }
        guard given.count == 1 else {
            reader.error(view.line, "store: give exactly one of 'redis' or 'memory'")
            return .memory
        }
        if let mem = view.entries["memory"]?.value {
            if !mem.isNull { _ = reader.mapping(mem, path: "store.memory", section: .memoryStore) }
            return .memory
        }
        var redis = RedisConfig()
        guard let rnode = view.entries["redis"]?.value, !rnode.isNull else { return .redis(redis) }
        guard let rv = reader.mapping(rnode, path: "store.redis", section: .redis) else { return .redis(redis) }
        var parsedURL: RedisURL?
        if let url = reader.string(rv, "url"), let unode = rv["url"] {
            switch RedisURL.parse(url) {
            case .success(let parsed):
                redis.url = url
                parsedURL = parsed
            case .failure(let e): reader.error(at: unode, "store.redis.url: \(e.message)")
            }
        }
        if let cnode = rv["cluster"] {
            if rv["url"] != nil {
                reader.error(at: cnode, "store.redis: give either 'url' (one server) or 'cluster' (seed nodes), not both")
            }
            parsedURL = parseClusterSeeds(cnode, into: &redis)
        }
        if let tnode = rv["tls"], let tls = clientTLS(tnode, path: "store.redis.tls") {
            if let parsedURL, !parsedURL.tls {
                reader.error(at: tnode, "store.redis.tls: only with a rediss:// url (the connection would not use TLS)")
            }
            redis.tls = tls
        }
        if let password = secret(rv, "password") {
            if parsedURL?.password != nil, let pnode = rv["password"] {
                reader.error(at: pnode, "store.redis.password: the URL carries a password too; give it in one place")
            }
            redis.password = password
        }
        if let t = reader.duration(rv, "connectTimeout") { redis.connectTimeout = t }
        if let t = reader.duration(rv, "commandTimeout") { redis.commandTimeout = t }
        if let n = reader.int(rv, "connectionsPerWorker", min: 1, max: 64) { redis.connectionsPerWorker = n }
        return .redis(redis)
    }

    /// `store.redis.cluster`: seed node URLs, all of one scheme and one set
    /// of credentials (the other nodes are found through them and get the
    /// same), database 0 (a cluster has no other). → the first seed.
    private func parseClusterSeeds(_ node: Node, into redis: inout RedisConfig) -> RedisURL? {
        let path = "store.redis.cluster"
        guard let items = reader.sequence(node, path: path) else { return nil }
        guard !items.isEmpty else {
            reader.error(at: node, "\(path): give at least one seed node URL")
            return nil
        }
        var seeds: [(String, RedisURL)] = []
        for (i, item) in items.enumerated() {
            guard let text = reader.scalarString(item, path: "\(path)[\(i)]", what: "a redis:// URL") else { continue }
            switch RedisURL.parse(text) {
            case .success(let url):
                if url.database != 0 {
                    reader.error(at: item, "\(path)[\(i)]: a cluster has only database 0")
                } else if let first = seeds.first?.1,
                    first.tls != url.tls || first.username != url.username || first.password != url.password
                {
                    reader.error(at: item, "\(path)[\(i)]: every seed needs the same scheme and credentials as the first")
                } else {
                    seeds.append((text, url))
                }
            case .failure(let e):
                reader.error(at: item, "\(path)[\(i)]: \(e.message)")
            }
        }
        redis.cluster = seeds.map(\.0)
        return seeds.first?.1
    }

    func parseTrust(_ node: Node) -> TrustConfig {
        var t = TrustConfig()
        guard let view = reader.mapping(node, path: "trust", section: .trust) else { return t }
        if let prefix = reader.string(view, "headerPrefix"), let n = view["headerPrefix"] {
            if ConfigSyntax.isToken(prefix) {
                t.headerPrefix = prefix
            } else {
                reader.error(at: n, "trust.headerPrefix: '\(prefix)' is not a valid header name prefix")
            }
        }
        t.signingSecret = secret(view, "signingSecret")
        return t
    }

    // MARK: upstreams, routes

    func parseUpstreams(_ top: ConfigReader.MappingView) -> [String: UpstreamConfig]? {
        guard let node = reader.required(top, "upstreams") else { return nil }
        guard case .mapping(let mapping) = node else {
            reader.error(at: node, "upstreams: expected a mapping of name to upstream, got \(reader.shape(node))")
            return nil
        }
        if mapping.count == 0 { reader.error(at: node, "upstreams: at least one upstream is required") }
        var result: [String: UpstreamConfig] = [:]
        for (keyNode, value) in mapping {
            guard case .scalar(let k) = keyNode, !k.string.isEmpty,
                k.string.utf8.allSatisfy({ ConfigSyntax.isAlnum($0) || "-_.".utf8.contains($0) })
            else {
                reader.error(at: keyNode, "upstreams: names must be letters, digits, '-', '_' or '.'")
                continue
            }
            let name = k.string
            let path = "upstreams.\(name)"
            guard let view = reader.mapping(value, path: path, section: .upstream) else {
                result[name] = UpstreamConfig(endpoints: [])
                continue
            }
            var endpoints: [UpstreamEndpoint] = []
            if let enode = reader.required(view, "endpoints"), let list = reader.sequence(enode, path: "\(path).endpoints") {
                if list.isEmpty { reader.error(at: enode, "\(path).endpoints: at least one endpoint is required") }
                for (i, item) in list.enumerated() {
                    guard let text = reader.scalarString(item, path: "\(path).endpoints[\(i)]") else { continue }
                    switch ConfigSyntax.upstreamEndpoint(text) {
                    case .success(let ep): endpoints.append(ep)
                    case .failure(let e): reader.error(at: item, "\(path).endpoints[\(i)]: \(e.message)")
                    }
                }
            }
            // One upstream, one transport: a mix would send some requests in
            // cleartext and some not, depending on the round robin.
            if Set(endpoints.map(\.scheme)).count > 1, let enode = view["endpoints"] {
                let schemes = Set(endpoints.map { "\($0.scheme.rawValue)://" }).sorted().joined(separator: " and ")
                reader.error(at: enode, "\(path).endpoints: mixes \(schemes) endpoints; use one scheme per upstream")
            }
            var u = UpstreamConfig(endpoints: endpoints)
            if let tnode = view["tls"], let tls = clientTLS(tnode, path: "\(path).tls") {
                if !endpoints.isEmpty, !endpoints.contains(where: \.tls) {
                    reader.error(at: tnode, "\(path).tls: only with https:// or h2:// endpoints (the connections would not use TLS)")
                }
                u.tls = tls
            }
            if let t = reader.duration(view, "connectTimeout") { u.connectTimeout = t }
            if let t = reader.duration(view, "responseTimeout") { u.responseTimeout = t }
            if let t = reader.duration(view, "idleTimeout") { u.idleTimeout = t }
            if let n = reader.int(view, "maxConnectionsPerEndpoint", min: 1, max: 100_000) { u.maxConnectionsPerEndpoint = n }
            if let n = reader.int(view, "maxStreamsPerConnection", min: 1, max: 10_000) {
                if !endpoints.isEmpty, !endpoints.contains(where: \.isHTTP2), let node = view["maxStreamsPerConnection"] {
                    reader.error(at: node, "\(path).maxStreamsPerConnection: only with h2c:// or h2:// endpoints (HTTP/1.1 carries one request per connection)")
                }
                u.maxStreamsPerConnection = n
            }
            if let n = reader.int(view, "maxConnectionsPerClient", min: 1, max: 100_000) {
                if n > u.inFlightCapacity, let node = view["maxConnectionsPerClient"] {
                    let what = u.isHTTP2
                        ? "maxConnectionsPerEndpoint × maxStreamsPerConnection (\(u.inFlightCapacity))"
                        : "maxConnectionsPerEndpoint (\(u.maxConnectionsPerEndpoint))"
                    reader.error(at: node, "\(path).maxConnectionsPerClient: \(n) exceeds \(what)")
                }
                u.maxConnectionsPerClient = n
            }
            result[name] = u
        }
        return result
    }

    func parseRoutes(
        _ top: ConfigReader.MappingView, upstreams: [String: UpstreamConfig]?, limits: LimitsConfig
    ) -> [RouteConfig]? {
        guard let node = reader.required(top, "routes"), let items = reader.sequence(node, path: "routes") else { return nil }
        if items.isEmpty { reader.error(at: node, "routes: at least one route is required") }
        var result: [RouteConfig] = []
        for (i, item) in items.enumerated() {
            let path = "routes[\(i)]"
            guard let view = reader.mapping(item, path: path, section: .route) else { continue }
            let match = reader.required(view, "match").flatMap { routeMatch($0, path: "\(path).match") }
            let upstream = reader.string(view, "upstream", required: true)
            if let upstream, let upstreams, upstreams[upstream] == nil, let n = view["upstream"] {
                let known = upstreams.keys.sorted().joined(separator: ", ")
                reader.error(at: n, "\(path).upstream: no upstream named '\(upstream)' (known: \(known))")
            }
            let mode = reader.oneOf(view, "mode", PolicyMode.self, required: true)
            var challengeRequired = false
            if let cnode = view["challenge"], let text = reader.scalarString(cnode, path: "\(path).challenge") {
                switch text {
                case "required": challengeRequired = true
                case "none": challengeRequired = false
                default: reader.error(at: cnode, "\(path).challenge: expected one of required, none, got '\(text)'")
                }
            }
            let bindBody = reader.bool(view, "bindBody")
            let routeLimits = view["limits"].map { parseRouteLimits($0, path: "\(path).limits") } ?? RouteLimits()
            let maxRequestBody = routeLimits.maxRequestBodyBytes ?? limits.maxRequestBodyBytes
            let maxBody = reader.size(view, "maxBodyBytes")
            if let maxBody, maxBody > maxRequestBody, let n = view["maxBodyBytes"] {
                let limitKey = routeLimits.maxRequestBodyBytes == nil ? "limits.maxRequestBodyBytes" : "\(path).limits.maxRequestBodyBytes"
                reader.error(at: n, "\(path).maxBodyBytes: \(SizeParser.format(maxBody)) exceeds \(limitKey) (\(SizeParser.format(maxRequestBody)))")
            }
            let onStoreError = reader.oneOf(view, "onStoreError", StoreErrorAction.self)
            let maxRisk = reader.int(view, "maxRiskMetric", min: 0, max: Int(ConfigReader.maxNumber))
            let forward = reader.bool(view, "forwardAssertionHeaders")
            let rules = view["rules"].flatMap { parseRules($0, path: "\(path).rules", routeLevel: true) }
            if rules != nil, mode == .passthrough, let n = view["rules"] {
                reader.error(at: n, "\(path).rules: a passthrough route checks no assertion, so it takes no rules")
            }
            let deviceCheck = reader.oneOf(view, "deviceCheck", DeviceCheckMode.self)
            let fallback = reader.oneOf(view, "fallback", RouteFallback.self)
            let onDeviceCheckError = reader.oneOf(view, "onDeviceCheckError", StoreErrorAction.self)
            if mode == .passthrough {
                // risk.md §6.10: passthrough checks nothing, so it asks DeviceCheck nothing.
                for key in ["fallback", "onDeviceCheckError"] where view[key] != nil {
                    if let n = view[key] { reader.error(at: n, "\(path).\(key): a passthrough route takes no \(key)") }
                }
                if let d = deviceCheck, d != .none, let n = view["deviceCheck"] {
                    reader.error(at: n, "\(path).deviceCheck: a passthrough route takes no deviceCheck (only none)")
                }
            } else {
                if fallback == .device, (deviceCheck ?? DeviceCheckMode.none) == DeviceCheckMode.none, let n = view["fallback"] {
                    reader.error(at: n, "\(path).fallback: device needs deviceCheck: validate or query on the route")
                }
                if onDeviceCheckError != nil, (deviceCheck ?? DeviceCheckMode.none) == DeviceCheckMode.none, let n = view["onDeviceCheckError"] {
                    reader.error(at: n, "\(path).onDeviceCheckError: the route has no deviceCheck")
                }
                for (block, set) in [("require", rules?.require), ("flag", rules?.flag)] where set?.deviceBits != nil {
                    if deviceCheck != .query, let n = view["rules"] {
                        reader.error(at: n, "\(path).rules.\(block).deviceBits: needs deviceCheck: query on the route (bits are read by a query)")
                    }
                }
            }
            if maxRisk != nil, rules?.require.maxRiskMetric != nil, let n = view["maxRiskMetric"] {
                reader.error(at: n, "\(path).maxRiskMetric: also given as \(path).rules.require.maxRiskMetric; keep one (they are the same rule)")
            }
            guard let match, let upstream, let mode else { continue }
            var route = RouteConfig(match: match, upstream: upstream, mode: mode)
            route.challengeRequired = challengeRequired
            if let bindBody { route.bindBody = bindBody }
            route.maxBodyBytes = maxBody ?? min(route.maxBodyBytes, maxRequestBody)
            route.limits = routeLimits
            if let onStoreError { route.onStoreError = onStoreError }
            if let rules { route.rules = rules }
            if let maxRisk { route.maxRiskMetric = maxRisk }
            if let forward { route.forwardAssertionHeaders = forward }
            if let deviceCheck { route.deviceCheck = deviceCheck }
            route.fallback = fallback
            if let onDeviceCheckError { route.onDeviceCheckError = onDeviceCheckError }
            result.append(route)
        }
        return result
    }

    /// `routes[].limits`: the route's own values of the global body limits
    /// and of its upstream's `responseTimeout`.
    func parseRouteLimits(_ node: Node, path: String) -> RouteLimits {
        var l = RouteLimits()
        guard let view = reader.mapping(node, path: path, section: .routeLimits) else { return l }
        l.maxRequestBodyBytes = reader.size(view, "maxRequestBodyBytes")
        l.requestBodyTimeout = reader.duration(view, "requestBodyTimeout")
        l.minRequestBodyRate = reader.size(view, "minRequestBodyRate")
        l.responseTimeout = reader.duration(view, "responseTimeout")
        return l
    }

    func routeMatch(_ node: Node, path: String) -> RouteMatch? {
        guard let view = reader.mapping(node, path: path, section: .routeMatch) else {
            return nil
        }
        if let r = view.entries["regex"] {
            reader.error(at: r.key, "\(path).regex: regex matching is not supported yet (use prefix or exact)")
            return nil
        }
        let given = ["prefix", "exact"].filter { view.entries[$0] != nil }
        guard given.count == 1 else {
            reader.error(view.line, "\(path): give exactly one of 'prefix' or 'exact'")
            return nil
        }
        let key = given[0]
        guard let text = reader.string(view, key, required: true), let n = view[key] else { return nil }
        if let e = ConfigSyntax.path(text) {
            reader.error(at: n, "\(path).\(key): \(e.message)")
            return nil
        }
        var methods: Set<String>?
        if let mnode = view["methods"], let list = reader.sequence(mnode, path: "\(path).methods") {
            if list.isEmpty { reader.error(at: mnode, "\(path).methods: must not be empty (omit it for any method)") }
            var set = Set<String>()
            for (i, item) in list.enumerated() {
                guard let m = reader.scalarString(item, path: "\(path).methods[\(i)]") else { continue }
                guard ConfigSyntax.isToken(m) else {
                    reader.error(at: item, "\(path).methods[\(i)]: '\(m)' is not a valid method")
                    continue
                }
                set.insert(m.uppercased())
            }
            methods = set
        }
        return RouteMatch(kind: key == "prefix" ? .prefix(text) : .exact(text), methods: methods)
    }

    // MARK: limits, fraudMetric, logging

    func parseLimits(_ node: Node) -> LimitsConfig {
        var l = LimitsConfig()
        guard let view = reader.mapping(node, path: "limits", section: .limits) else { return l }
        if let n = reader.int(view, "maxConcurrentStreams", min: 1, max: Int(ConfigReader.maxNumber)) { l.maxConcurrentStreams = n }
        if let n = reader.size(view, "maxHeaderListBytes", min: 1024, max: 8 << 20) { l.maxHeaderListBytes = n }
        if let n = reader.size(view, "maxRequestBodyBytes") { l.maxRequestBodyBytes = n }
        if let r = view["streamResetRate"].flatMap({ rateConfig($0, path: "limits.streamResetRate") }) {
            l.streamResetRate = r
        }
        if let t = reader.duration(view, "requestBodyTimeout") { l.requestBodyTimeout = t }
        if let n = reader.size(view, "minRequestBodyRate") { l.minRequestBodyRate = n }
        if let t = reader.duration(view, "streamWriteTimeout") { l.streamWriteTimeout = t }
        if let n = reader.size(view, "minResponseRate") { l.minResponseRate = n }
        if let n = reader.size(view, "maxBufferedBodyBytes", min: 64 << 10) { l.maxBufferedBodyBytes = n }
        if let n = reader.size(view, "maxQueuedResponseBytes", min: 1 << 20) { l.maxQueuedResponseBytes = n }
        if let p = reader.oneOf(view, "underscoresInHeaders", UnderscoreHeaderPolicy.self) { l.underscoresInHeaders = p }
        if let n = reader.int(view, "maxConnections", min: 1, max: 10_000_000) { l.maxConnections = n }
        if let n = reader.int(view, "maxConnectionsPerAddress", min: 1, max: 10_000_000) { l.maxConnectionsPerAddress = n }
        return l
    }

    func parseFraudMetric(_ node: Node) -> FraudMetricConfig? {
        guard let view = reader.mapping(node, path: "fraudMetric", section: .fraudMetric) else { return nil }
        let teamId = reader.string(view, "teamId", required: true)
        if let teamId, !ConfigSyntax.isTeamId(teamId) {
            reader.error(at: view["teamId"], "fraudMetric.teamId: '\(teamId)' must be 10 characters of A-Z and 0-9")
        }
        let keyId = reader.string(view, "keyId", required: true)
        if let keyId, !ConfigSyntax.isTeamId(keyId) {
            reader.error(at: view["keyId"], "fraudMetric.keyId: '\(keyId)' must be 10 characters of A-Z and 0-9")
        }
        let key = secret(view, "privateKey", required: true)
        let baseURL = httpsURL(view, "baseURL", section: "fraudMetric")
        let developmentBaseURL = httpsURL(view, "developmentBaseURL", section: "fraudMetric")
        let refresh = reader.duration(view, "refreshEvery")
        if let refresh, refresh < .minutes(1) {
            reader.error(at: view["refreshEvery"], "fraudMetric.refreshEvery: must be at least 1m")
        }
        let poll = reader.duration(view, "pollEvery")
        let caFile = pemFile(view, "caFile", label: "CERTIFICATE", required: false)
        guard let teamId, let keyId, let key else { return nil }
        var f = FraudMetricConfig(teamId: teamId, keyId: keyId, privateKey: key)
        if let baseURL { f.baseURL = baseURL }
        if let developmentBaseURL { f.developmentBaseURL = developmentBaseURL }
        if let refresh { f.refreshEvery = refresh }
        if let poll { f.pollEvery = poll }
        f.caFile = caFile
        return f
    }

    /// `https://host[:port]` without a trailing `/`.
    func httpsURL(_ view: ConfigReader.MappingView, _ name: String, section: String) -> String? {
        guard let url = reader.string(view, name) else { return nil }
        if let e = ConfigSyntax.httpsURL(url) {
            reader.error(at: view[name], "\(section).\(name): \(e.message)")
            return nil
        }
        return url.hasSuffix("/") ? String(url.dropLast()) : url
    }

    /// `deviceCheck:`; the Apple key settings fall back to `fraudMetric`'s.
    func parseDeviceCheck(
        _ node: Node, fraudMetric: FraudMetricConfig?, top: ConfigReader.MappingView
    ) -> DeviceCheckConfig? {
        guard let view = reader.mapping(node, path: "deviceCheck", section: .deviceCheck) else { return nil }
        // Without fraudMetric there is nothing to fall back to; with an
        // invalid fraudMetric its own errors already say so.
        let fallback = fraudMetric == nil && top["fraudMetric"] == nil
        func id(_ name: String, _ inherited: String?) -> String? {
            guard let value = reader.string(view, name) else {
                if inherited == nil, fallback {
                    reader.error(at: node, "deviceCheck.\(name): required (or set fraudMetric.\(name), which it defaults to)")
                }
                return inherited
            }
            if !ConfigSyntax.isTeamId(value) {
                reader.error(at: view[name], "deviceCheck.\(name): '\(value)' must be 10 characters of A-Z and 0-9")
                return nil
            }
            return value
        }
        let teamId = id("teamId", fraudMetric?.teamId)
        let keyId = id("keyId", fraudMetric?.keyId)
        var key = secret(view, "privateKey")
        if view["privateKey"] == nil {
            key = fraudMetric?.privateKey
            if key == nil, fallback {
                reader.error(at: node, "deviceCheck.privateKey: required (or set fraudMetric.privateKey, which it defaults to)")
            }
        }
        let baseURL = httpsURL(view, "baseURL", section: "deviceCheck")
        let developmentBaseURL = httpsURL(view, "developmentBaseURL", section: "deviceCheck")
        let environment = reader.oneOf(view, "environment", AppEnvironment.self)
        let timeout = reader.duration(view, "timeout")
        if let timeout, timeout > DeviceCheckConfig.maxTimeout {
            reader.error(
                at: view["timeout"],
                "deviceCheck.timeout: at most \(DurationParser.format(DeviceCheckConfig.maxTimeout)) (requests wait on it), got \(DurationParser.format(timeout))")
        }
        let retry = reader.duration(view, "updateRetryFor")
        if let retry, retry < .seconds(1) {
            reader.error(at: view["updateRetryFor"], "deviceCheck.updateRetryFor: must be at least 1s")
        }
        let poll = reader.duration(view, "updatePollEvery")
        if let poll, !DeviceCheckConfig.updatePollRange.contains(poll) {
            reader.error(
                at: view["updatePollEvery"],
                "deviceCheck.updatePollEvery: between \(DurationParser.format(DeviceCheckConfig.updatePollRange.lowerBound)) and \(DurationParser.format(DeviceCheckConfig.updatePollRange.upperBound)), got \(DurationParser.format(poll))")
        }
        let batch = reader.int(
            view, "updateBatch", min: DeviceCheckConfig.updateBatchRange.lowerBound, max: DeviceCheckConfig.updateBatchRange.upperBound)
        let maxQueued = reader.int(
            view, "maxQueuedUpdates", min: DeviceCheckConfig.maxQueuedUpdatesRange.lowerBound,
            max: DeviceCheckConfig.maxQueuedUpdatesRange.upperBound)
        let caFile = pemFile(view, "caFile", label: "CERTIFICATE", required: false)
        guard let teamId, let keyId, let key else { return nil }
        var d = DeviceCheckConfig(teamId: teamId, keyId: keyId, privateKey: key)
        if let baseURL { d.baseURL = baseURL }
        if let developmentBaseURL { d.developmentBaseURL = developmentBaseURL }
        if let environment { d.environment = environment }
        if let timeout, timeout <= DeviceCheckConfig.maxTimeout { d.timeout = timeout }
        if let retry { d.updateRetryFor = retry }
        if let poll, DeviceCheckConfig.updatePollRange.contains(poll) { d.updatePollEvery = poll }
        if let batch { d.updateBatch = batch }
        if let maxQueued { d.maxQueuedUpdates = maxQueued }
        d.caFile = caFile
        return d
    }

    static let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    func parseLogging(_ node: Node) -> LoggingConfig {
        var l = LoggingConfig()
        guard let view = reader.mapping(node, path: "logging", section: .logging) else { return l }
        if let level = reader.string(view, "level") {
            if Self.levels.contains(level) {
                l.level = level
            } else {
                reader.error(at: view["level"], "logging.level: expected one of \(Self.levels.joined(separator: ", ")), got '\(level)'")
            }
        }
        if let format = reader.oneOf(view, "format", LogFormat.self) { l.format = format }
        return l
    }

    // MARK: cross-section checks

    /// A request may wait `responseTimeout` for its upstream, or its client
    /// `requestBodyTimeout` between body bytes, without a byte on the client
    /// connection, so the idle timeout must outlast the longest of these
    /// waits, the routes' own (`routes[].limits`) included: unset, it is 120 s
    /// or that plus 30 s, whichever is longer; set, it must be longer.
    func resolveIdleTimeouts(
        _ listeners: inout [ListenerConfig], upstreams: [String: UpstreamConfig], routes: [RouteConfig],
        limits: LimitsConfig, top: ConfigReader.MappingView
    ) {
        // Candidates in a fixed order and ties to the first, so the error names the same key every run.
        var waits: [(TimeAmount, String)] = upstreams.sorted { $0.key < $1.key }.map {
            ($0.value.responseTimeout, "upstreams.\($0.key).responseTimeout")
        }
        waits.append((limits.requestBodyTimeout, "limits.requestBodyTimeout"))
        for (i, r) in routes.enumerated() {
            if let t = r.limits.responseTimeout { waits.append((t, "routes[\(i)].limits.responseTimeout")) }
            if let t = r.limits.requestBodyTimeout { waits.append((t, "routes[\(i)].limits.requestBodyTimeout")) }
        }
        var longest: (wait: TimeAmount, key: String)?
        for w in waits where w.0 > (longest?.wait ?? .zero) { longest = w }
        for i in listeners.indices {
            guard let longest else {
                if listeners[i].idleTimeout == nil { listeners[i].idleTimeout = ListenerConfig.defaultIdleTimeout }
                continue
            }
            guard let idle = listeners[i].idleTimeout else {
                listeners[i].idleTimeout = max(ListenerConfig.defaultIdleTimeout, longest.wait + .seconds(30))
                continue
            }
            if idle <= longest.wait {
                reader.error(
                    listenerLine(top, i, key: "idleTimeout"),
                    "listeners[\(i)].idleTimeout: \(DurationParser.format(idle)) must be longer than "
                        + "\(longest.key) (\(DurationParser.format(longest.wait)))")
            }
        }
    }

    func crossCheck(listeners: [ListenerConfig], admin: AdminConfig, top: ConfigReader.MappingView) {
        if let i = listeners.firstIndex(where: { $0.address.overlaps(admin.address) }) {
            let line = top["admin"].flatMap { node -> Int? in
                if case .mapping(let m) = node, let a = m["address"] { return a.mark?.line }
                return node.mark?.line
            }
            reader.error(line, "admin.address: \(admin.address) overlaps listeners[\(i)] (\(listeners[i].address)): both cannot be bound")
        }
    }

    private func listenerLine(_ top: ConfigReader.MappingView, _ index: Int, key: String) -> Int? {
        itemLine(top, "listeners", index, key: key)
    }

    /// The line of `<section>[index].<key>`, else of the item.
    private func itemLine(_ top: ConfigReader.MappingView, _ section: String, _ index: Int, key: String) -> Int? {
        guard case .sequence(let sequence)? = top[section] else { return nil }
        let items = Array(sequence)
        guard index < items.count else { return nil }
        if case .mapping(let m) = items[index], let node = m[key] { return node.mark?.line }
        return items[index].mark?.line
    }
}
