import Yams

/// Every mapping of the configuration file and the keys accepted in it.
/// `ConfigSectionParser` reads each mapping through `mapping(_:path:section:)`,
/// which refuses any key not listed here, so this table is exactly what the
/// parser accepts; `DocCoverageTests` fails when docs/config.md does not
/// name one of these keys at each of the section's `paths`.
enum ConfigSection: String, CaseIterable, Sendable {
    case top
    case listener
    case listenerTLS
    case admin
    case secret
    case app
    case attestation
    case rate
    case assertionHeaders
    case store
    case memoryStore
    case redis
    case clientTLS
    case trust
    case upstream
    case route
    case routeMatch
    case routeLimits
    case rules
    case ruleSet
    case deviceBits
    case limits
    case fraudMetric
    case deviceCheck
    case logging

    /// The accepted keys, in the order docs/config.md presents them.
    var keys: [String] {
        switch self {
        case .top:
            return [
                "listeners", "admin", "apps", "attestation", "store", "trust", "upstreams", "routes", "limits",
                "fraudMetric", "deviceCheck", "logging",
            ]
        case .listener: return ["address", "tls", "handshakeTimeout", "headerTimeout", "idleTimeout"]
        case .listenerTLS: return ["certificate", "privateKey"]
        case .admin: return ["address", "token"]
        case .secret: return ["file", "env"]
        case .app: return ["appId", "environments", "rules"]
        case .attestation:
            return [
                "prefix", "challengeTTL", "challengeRate", "rampUp", "trustAnchors", "receiptTrustAnchors", "clockSkew",
                "headers",
            ]
        case .rate: return ["perSecond", "burst"]
        case .assertionHeaders: return ["keyId", "assertion", "challenge", "deviceToken"]
        case .store: return ["memory", "redis"]
        case .memoryStore: return []
        case .redis: return ["url", "cluster", "password", "connectTimeout", "commandTimeout", "connectionsPerWorker", "tls"]
        case .clientTLS: return ["caFile", "serverName", "certificate", "privateKey"]
        case .trust: return ["headerPrefix", "signingSecret"]
        case .upstream:
            return [
                "endpoints", "connectTimeout", "responseTimeout", "idleTimeout", "maxConnectionsPerEndpoint",
                "maxConnectionsPerClient", "maxStreamsPerConnection", "tls",
            ]
        case .route:
            return [
                "match", "upstream", "mode", "challenge", "bindBody", "maxBodyBytes", "onStoreError", "maxRiskMetric",
                "forwardAssertionHeaders", "rules", "deviceCheck", "fallback", "onDeviceCheckError", "limits",
            ]
        case .routeMatch: return ["prefix", "exact", "regex", "methods"]
        case .routeLimits: return ["maxRequestBodyBytes", "requestBodyTimeout", "minRequestBodyRate", "responseTimeout"]
        case .rules: return ["require", "flag"]
        case .ruleSet:
            return ["environments", "launchCategories", "minAppVersion", "keyPolicy", "maxUserKeys", "maxRiskMetric", "deviceBits"]
        case .deviceBits: return ["bit0", "bit1"]
        case .limits:
            return [
                "maxConcurrentStreams", "maxHeaderListBytes", "maxRequestBodyBytes", "streamResetRate",
                "requestBodyTimeout", "minRequestBodyRate", "streamWriteTimeout", "minResponseRate", "maxBufferedBodyBytes", "maxQueuedResponseBytes",
                "underscoresInHeaders", "maxConnections", "maxConnectionsPerAddress",
            ]
        case .fraudMetric:
            return ["teamId", "keyId", "privateKey", "baseURL", "developmentBaseURL", "refreshEvery", "pollEvery", "caFile"]
        case .deviceCheck:
            return [
                "teamId", "keyId", "privateKey", "baseURL", "developmentBaseURL", "environment", "timeout",
                "updateRetryFor", "updatePollEvery", "updateBatch", "maxQueuedUpdates", "caFile",
            ]
        case .logging: return ["level", "format"]
        }
    }

    var allowed: Set<String> { Set(keys) }

    /// Where the mapping occurs in a file, written as docs/config.md writes
    /// key paths (`listeners[].tls`, `upstreams.<name>.tls`; `<secret>` stands
    /// for any key that takes a secret). A key `k` is documented as
    /// `` `path.k` `` (or `` `k` `` at top level).
    var paths: [String] {
        switch self {
        case .top: return [""]
        case .listener: return ["listeners[]"]
        case .listenerTLS: return ["listeners[].tls"]
        case .admin: return ["admin"]
        case .secret: return ["<secret>"]
        case .app: return ["apps[]"]
        case .attestation: return ["attestation"]
        case .rate: return ["attestation.challengeRate", "attestation.rampUp", "limits.streamResetRate"]
        case .assertionHeaders: return ["attestation.headers"]
        case .store: return ["store"]
        case .memoryStore: return ["store.memory"]
        case .redis: return ["store.redis"]
        case .clientTLS: return ["store.redis.tls", "upstreams.<name>.tls"]
        case .trust: return ["trust"]
        case .upstream: return ["upstreams.<name>"]
        case .route: return ["routes[]"]
        case .routeMatch: return ["routes[].match"]
        case .routeLimits: return ["routes[].limits"]
        case .rules: return ["apps[].rules", "routes[].rules"]
        // `<rules>` stands for `apps[].rules` and `routes[].rules`.
        case .ruleSet: return ["<rules>.require", "<rules>.flag"]
        case .deviceBits: return ["<rules>.require.deviceBits", "<rules>.flag.deviceBits"]
        case .limits: return ["limits"]
        case .fraudMetric: return ["fraudMetric"]
        case .deviceCheck: return ["deviceCheck"]
        case .logging: return ["logging"]
        }
    }

    /// Every accepted key with its full documented path, e.g. `listeners[].tls.certificate`.
    static var documentedKeyPaths: [String] {
        allCases.flatMap { section in
            section.paths.flatMap { path in section.keys.map { path.isEmpty ? $0 : "\(path).\($0)" } }
        }
    }
}

extension ConfigReader {
    /// A mapping of `section`: keys outside `section.keys` are reported as unknown.
    func mapping(_ node: Node, path: String, section: ConfigSection) -> MappingView? {
        mapping(node, path: path, allowed: section.allowed)
    }
}
