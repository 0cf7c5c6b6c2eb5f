import AssertGateRedis
import Foundation
import NIOCore
import Testing
@testable import AssertGateCore

private let minimalYAML = """
    listeners: [{address: 127.0.0.1:8080}]
    apps: [{appId: ABCDE12345.com.example.app, environments: [development]}]
    store: {memory: {}}
    upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
    routes:
      - {match: {prefix: /api/}, upstream: api, mode: enforce}
      - {match: {prefix: /}, upstream: api, mode: passthrough}

    """

private func errors(_ yaml: String, env: [String: String] = [:], base: String? = nil) -> [String] {
    ConfigText.errors(yaml, env: env, base: base)
}

private func load(_ yaml: String, env: [String: String] = [:], base: String? = nil) throws -> GatewayConfig {
    try ConfigText.load(yaml, env: env, base: base)
}

/// The minimal file with `extra` appended at top level (a key not already in it).
private func minimalPlus(_ extra: String) -> String { minimalYAML + extra }

@Suite struct ConfigLoaderTests {
    @Test func minimalFileResolvesDefaults() throws {
        let c = try load(minimalYAML)
        #expect(c.listeners.map(\.address) == [HostPort(host: "127.0.0.1", port: 8080)])
        #expect(c.listeners[0].tls == nil)
        #expect(c.admin.address == HostPort(host: "127.0.0.1", port: 9901))
        #expect(c.admin.token == nil)
        #expect(c.apps.count == 1)
        #expect(c.apps[0].environments == [.development])
        guard case .memory = c.store else {
            Issue.record("expected memory store")
            return
        }
        #expect(c.upstreams["api"]?.endpoints == [UpstreamEndpoint(host: "127.0.0.1", port: 9001)])
        #expect(c.upstreams["api"]?.connectTimeout == .seconds(2))
        #expect(c.upstreams["api"]?.maxConnectionsPerEndpoint == 64)
        #expect(c.routes.count == 2)
        #expect(c.routes[0].match.kind == .prefix("/api/"))
        #expect(c.routes[0].match.methods == nil)
        #expect(c.routes[0].mode == .enforce)
        #expect(c.routes[0].onStoreError == .reject)
        #expect(c.routes[0].challengeRequired == false)
        #expect(c.routes[0].bindBody == true)
        #expect(c.routes[0].maxBodyBytes == 1 << 20)
        #expect(c.routes[0].maxRiskMetric == nil)
        #expect(c.routes[0].forwardAssertionHeaders == false)
        #expect(c.routes[1].mode == .passthrough)
        #expect(c.attestation.prefix == "/assertgate/v1")
        #expect(c.attestation.challengeTTL == .seconds(120))
        #expect(c.trust.headerPrefix == "X-AssertGate-")
        #expect(c.trust.signingSecret == nil)
        #expect(c.limits.maxRequestBodyBytes == 16 << 20)
        #expect(c.fraudMetric == nil)
        #expect(c.logging.level == "info")
        #expect(c.logging.format == .json)
    }

    @Test func listenerTimeoutsHaveDefaultsAndMustOutlastUpstreamResponses() throws {
        let c = try load(minimalYAML)
        #expect(c.listeners[0].handshakeTimeout == .seconds(10))
        #expect(c.listeners[0].headerTimeout == .seconds(30))
        #expect(c.listeners[0].idleTimeout == .seconds(120))
        // Unset, it outlasts the slowest upstream by 30 s.
        let slow = try load(minimalYAML.replacingOccurrences(
            of: "endpoints: [http://127.0.0.1:9001]}", with: "endpoints: [http://127.0.0.1:9001], responseTimeout: 5m}"))
        #expect(slow.listeners[0].idleTimeout == .seconds(330))
        let set = try load(minimalYAML.replacingOccurrences(
            of: "listeners: [{address: 127.0.0.1:8080}]",
            with: "listeners: [{address: 127.0.0.1:8080, handshakeTimeout: 3s, headerTimeout: 5s, idleTimeout: 45s}]"))
        #expect(set.listeners[0].handshakeTimeout == .seconds(3))
        #expect(set.listeners[0].headerTimeout == .seconds(5))
        #expect(set.listeners[0].idleTimeout == .seconds(45))
        // The default responseTimeout is 30s: an idle timeout of 30s would cut
        // a request still waiting for its upstream.
        let e = errors(minimalYAML.replacingOccurrences(
            of: "listeners: [{address: 127.0.0.1:8080}]",
            with: "listeners: [{address: 127.0.0.1:8080, idleTimeout: 30s}]"))
        #expect(e.count == 1)
        #expect(e.first?.contains("listeners[0].idleTimeout: 30s must be longer than upstreams.api.responseTimeout (30s)") == true, "\(e)")
        #expect(e.first?.contains("config.yaml:1") == true, "\(e)")
        let zero = errors(minimalYAML.replacingOccurrences(
            of: "listeners: [{address: 127.0.0.1:8080}]",
            with: "listeners: [{address: 127.0.0.1:8080, handshakeTimeout: 0s}]"))
        #expect(zero.contains { $0.contains("listeners[0].handshakeTimeout: must be greater than 0") }, "\(zero)")
        // Upstreams tied for the slowest: the error names the first by name, in
        // every process (the upstreams are a dictionary, whose order is not).
        let tied = errors(minimalYAML
            .replacingOccurrences(of: "listeners: [{address: 127.0.0.1:8080}]", with: "listeners: [{address: 127.0.0.1:8080, idleTimeout: 30s}]")
            .replacingOccurrences(
                of: "upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}",
                with: "upstreams: {zeta: {endpoints: [http://127.0.0.1:9002]}, api: {endpoints: [http://127.0.0.1:9001]}, mid: {endpoints: [http://127.0.0.1:9003]}}"))
        #expect(tied.count == 1 && tied.first?.contains("upstreams.api.responseTimeout") == true, "\(tied)")
    }

    @Test func appEnvironmentsDefaultToProduction() throws {
        let yaml = minimalYAML.replacingOccurrences(of: ", environments: [development]", with: "")
        let c = try load(yaml)
        #expect(c.apps[0].environments == [.production])
    }

    /// The full example of docs/config.md (read from the file, so the
    /// reference cannot show a file that does not load).
    @Test func fullConfigMdExampleLoads() throws {
        let example = try ProjectDocs.configMdFullExample()
        let dir = try TempDir()
        defer { dir.remove() }
        let (cert, key) = try dir.writeCertAndKey(cert: "tls.crt", key: "tls.key")
        try dir.write("admin.token", "s3cret-admin-token\n")
        try dir.write("AuthKey_XYZ1234567.p8", "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n")
        let yaml = example.replacingOccurrences(of: "/etc/assertgate/", with: dir.path + "/")
        let c = try load(yaml, env: ["ASSERTGATE_TRUST_SECRET": "trust-secret"])

        #expect(c.listeners.count == 2)
        #expect(c.listeners[0].address == HostPort(host: "0.0.0.0", port: 8443))
        #expect(c.listeners[0].tls?.certificate == cert)
        #expect(c.listeners[0].tls?.privateKey == key)
        #expect(c.listeners[1].tls == nil)
        #expect(c.admin.token?.value == "s3cret-admin-token")
        #expect(c.admin.token?.source == .file(dir.path + "/admin.token"))
        #expect(c.apps.map(\.appId) == ["ABCDE12345.com.example.app", "ABCDE12345.com.example.app.Clip"])
        #expect(c.apps[1].environments == [.production])
        #expect(c.attestation.challengeRate == RateConfig(perSecond: 20, burst: 40))
        #expect(c.attestation.clockSkew == .seconds(60))
        #expect(c.attestation.headers.challenge == "AssertGate-Challenge")
        guard case .redis(let redis) = c.store else {
            Issue.record("expected redis store")
            return
        }
        #expect(redis.url == "redis://127.0.0.1:6379/0")
        #expect(redis.commandTimeout == .milliseconds(250))
        #expect(redis.endpoint == RedisURL(host: "127.0.0.1", port: 6379, username: nil, password: nil, database: 0))
        #expect(c.trust.signingSecret?.value == "trust-secret")
        #expect(c.trust.signingSecret?.source == .env("ASSERTGATE_TRUST_SECRET"))
        let legacy = try #require(c.upstreams["legacy"])
        #expect(legacy.responseTimeout == .seconds(30))
        #expect(legacy.idleTimeout == .seconds(60))
        #expect(c.routes.count == 4)
        let r0 = c.routes[0]
        #expect(r0.match.kind == .prefix("/api/payments"))
        #expect(r0.match.methods == ["POST"])
        #expect(r0.challengeRequired)
        #expect(r0.maxRiskMetric == 20)
        #expect(r0.onStoreError == .reject)
        #expect(r0.limits.isEmpty)
        #expect(c.routes[1].limits.requestBodyTimeout == .minutes(5))
        #expect(c.routes[1].limits.responseTimeout == .minutes(5))
        #expect(c.routes[1].limits.body(c.limits).maxBytes == 256 << 20)
        // The stream's 5 minutes set the listeners' idle timeout.
        #expect(c.listeners[1].idleTimeout == .seconds(330))
        #expect(c.routes[2].mode == .monitor)
        #expect(c.routes[2].onStoreError == .forward)
        #expect(c.limits.maxHeaderListBytes == 64 * 1024)
        #expect(c.limits.streamResetRate == RateConfig(perSecond: 1000, burst: 1000))
        let f = try #require(c.fraudMetric)
        #expect(f.teamId == "ABCDE12345")
        #expect(f.keyId == "XYZ1234567")
        #expect(f.privateKey.value.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(f.refreshEvery == .hours(24))
        #expect(f.pollEvery == .seconds(30))
        #expect(f.developmentBaseURL == "https://data-development.appattest.apple.com")
        #expect(c.listeners[0].handshakeTimeout == .seconds(10))
        #expect(c.logging.format == .json)
    }

    @Test func deployMinimalLoads() throws {
        let c = try ConfigLoader(environment: [:]).load(path: PackagePaths.root + "/deploy/minimal.yaml")
        #expect(c.routes.count == 2)
    }

    @Test func deployProductionLoads() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        _ = try dir.writeCertAndKey()
        try dir.write("admin.token", "token-from-file\n")
        let text = try String(contentsOfFile: PackagePaths.root + "/deploy/production.yaml", encoding: .utf8)
        let path = try dir.write("config.yaml", text)
        let c = try ConfigLoader(environment: ["ASSERTGATE_TRUST_SECRET": "x"]).load(path: path)
        #expect(c.listeners[0].address == HostPort(host: "::", port: 8443))
        #expect(c.listeners[0].tls?.certificate == dir.path + "/certs/tls.crt")
        #expect(c.admin.token?.value == "token-from-file")
        #expect(c.routes.count >= 3)
        #expect(c.attestation.rampUp == RateConfig(perSecond: 50, burst: 100))
        guard case .redis = c.store else {
            Issue.record("production example must use redis")
            return
        }
        // Without the env secret it must fail, naming the line of signingSecret.
        #expect(throws: ConfigError.self) { try ConfigLoader(environment: [:]).load(path: path) }
    }

    @Test func everyOptionalKeyAccepted() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let (cert, _) = try dir.writeCertAndKey()
        let yaml = """
            listeners:
              - address: "[::1]:8443"
                tls: {certificate: certs/tls.crt, privateKey: certs/tls.key}
              - address: localhost:0
            admin: {address: "[::1]:9902", token: inline-token}
            apps:
              - {appId: ABCDE12345.com.example.app, environments: [production, development]}
            attestation:
              prefix: /gate
              challengeTTL: 1m30s
              challengeRate: {perSecond: 2.5, burst: 5}
              trustAnchors: [certs/tls.crt]
              receiptTrustAnchors: [certs/tls.crt]
              clockSkew: 0s
              headers: {keyId: X-Key, assertion: X-Assert, challenge: X-Chal}
            store:
              redis: {url: "redis://user:p%40ss@redis.internal:6380/3", connectTimeout: 500ms, commandTimeout: 100ms, connectionsPerWorker: 2}
            trust: {headerPrefix: X-Gate-, signingSecret: inline-signing}
            upstreams:
              a.b-c_d: {endpoints: ["http://[::1]:9001", "http://backend"], connectTimeout: 1s, responseTimeout: 2s, idleTimeout: 3s, maxConnectionsPerEndpoint: 1}
            routes:
              - match: {exact: /x, methods: [get, POST]}
                upstream: a.b-c_d
                mode: monitor
                challenge: required
                bindBody: false
                maxBodyBytes: 512
                onStoreError: reject
                maxRiskMetric: 0
                forwardAssertionHeaders: true
            limits: {maxConcurrentStreams: 10, maxHeaderListBytes: 8KiB, maxRequestBodyBytes: 2MiB, streamResetRate: {perSecond: 10, burst: 20}}
            fraudMetric: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: P8}, baseURL: "https://data-development.appattest.apple.com/", refreshEvery: 12h}
            logging: {level: trace, format: text}
            """
        let c = try load(yaml, env: ["P8": "pem"], base: dir.path)
        #expect(c.listeners[0].address == HostPort(host: "::1", port: 8443))
        #expect(c.listeners[0].tls?.certificate == cert)
        #expect(c.listeners[1].address == HostPort(host: "localhost", port: 0))
        #expect(c.admin.address.description == "[::1]:9902")
        #expect(c.admin.token?.value == "inline-token")
        #expect(c.admin.token?.source == .inline)
        #expect(c.apps[0].environments == [.production, .development])
        #expect(c.attestation.prefix == "/gate")
        #expect(c.attestation.challengeTTL == .seconds(90))
        #expect(c.attestation.challengeRate == RateConfig(perSecond: 2.5, burst: 5))
        #expect(c.attestation.trustAnchors == [cert])
        #expect(c.attestation.receiptTrustAnchors == [cert])
        #expect(c.attestation.clockSkew == .zero)
        #expect(c.attestation.headers.keyId == "X-Key")
        guard case .redis(let r) = c.store else {
            Issue.record("expected redis")
            return
        }
        #expect(r.endpoint == RedisURL(host: "redis.internal", port: 6380, username: "user", password: "p@ss", database: 3))
        #expect(r.connectTimeout == .milliseconds(500))
        #expect(r.connectionsPerWorker == 2)
        #expect(c.trust.headerPrefix == "X-Gate-")
        #expect(c.trust.signingSecret?.value == "inline-signing")
        let u = try #require(c.upstreams["a.b-c_d"])
        #expect(u.endpoints == [UpstreamEndpoint(host: "::1", port: 9001), UpstreamEndpoint(host: "backend", port: 80)])
        #expect(u.idleTimeout == .seconds(3))
        #expect(u.maxConnectionsPerEndpoint == 1)
        let route = c.routes[0]
        #expect(route.match.kind == .exact("/x"))
        #expect(route.match.methods == ["GET", "POST"])
        #expect(route.mode == .monitor)
        #expect(route.challengeRequired)
        #expect(!route.bindBody)
        #expect(route.maxBodyBytes == 512)
        #expect(route.onStoreError == .reject)
        #expect(route.maxRiskMetric == 0)
        #expect(route.forwardAssertionHeaders)
        #expect(c.limits.maxConcurrentStreams == 10)
        #expect(c.limits.maxHeaderListBytes == 8192)
        #expect(c.limits.maxRequestBodyBytes == 2 << 20)
        #expect(c.limits.streamResetRate == RateConfig(perSecond: 10, burst: 20))
        #expect(c.fraudMetric?.baseURL == "https://data-development.appattest.apple.com")
        #expect(c.fraudMetric?.refreshEvery == .hours(12))
        #expect(c.logging.level == "trace")
        #expect(c.logging.format == .text)
    }

    @Test func defaultMaxBodyBytesIsCappedByLimit() throws {
        let c = try load(minimalPlus("limits: {maxRequestBodyBytes: 64KiB}\n"))
        #expect(c.routes[0].maxBodyBytes == 64 * 1024)
    }

    @Test func explicitOnStoreErrorWinsInEnforce() throws {
        let yaml = minimalYAML.replacingOccurrences(of: "mode: enforce}", with: "mode: enforce, onStoreError: forward}")
        #expect(try load(yaml).routes[0].onStoreError == .forward)
    }

    // MARK: errors with lines

    @Test func unknownKeyNamesKeyAndLine() {
        let yaml = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes:
              - match: {prefix: /api/}
                upstream: api
                mode: enforce
              - match: {prefix: /}
                upstream: api
                mdoe: passthrough
            """
        #expect(errors(yaml) == [
            "config.yaml:8: missing required key 'mode' in routes[1]",
            "config.yaml:10: unknown key 'mdoe' in routes[1]; did you mean 'mode'?",
        ])
    }

    @Test func unknownKeysAtEveryLevel() {
        let yaml = minimalYAML + """
            lmits: {}
            admin: {adress: 127.0.0.1:1}
            attestation: {headers: {keyid: X}}
            trust: {prefix: X-}
            logging: {format: json, colour: true}

            """
        #expect(errors(yaml) == [
            "config.yaml:8: unknown key 'lmits' at top level; did you mean 'limits'?",
            "config.yaml:9: unknown key 'adress' in admin; did you mean 'address'?",
            "config.yaml:10: unknown key 'keyid' in attestation.headers; did you mean 'keyId'?",
            "config.yaml:11: unknown key 'prefix' in trust",
            "config.yaml:12: unknown key 'colour' in logging",
        ])
        let nested = minimalYAML.replacingOccurrences(of: "{prefix: /api/}", with: "{prefix: /api/, method: [GET]}")
            .replacingOccurrences(of: "{memory: {}}", with: "{redis: {url: \"redis://h:1/0\", timeout: 1s}}")
        #expect(errors(nested) == [
            "config.yaml:3: unknown key 'timeout' in store.redis",
            "config.yaml:6: unknown key 'method' in routes[0].match; did you mean 'methods'?",
        ])
    }

    @Test func wrongTypesNameThePathAndLine() {
        let yaml = """
            listeners: {address: 127.0.0.1:8080}
            apps: [{appId: ABCDE12345.com.example.app, environments: production}]
            upstreams: {api: {endpoints: [http://127.0.0.1:9001], maxConnectionsPerEndpoint: many}}
            routes:
              - {match: /api, upstream: api, mode: enforce}
              - {match: {prefix: /}, upstream: [api], mode: passthrough, forwardAssertionHeaders: "true"}
            limits: {maxConcurrentStreams: 1.5}
            """
        #expect(errors(yaml) == [
            "config.yaml:1: listeners: expected a list, got a mapping",
            "config.yaml:2: apps[0].environments: expected a list, got a single value",
            "config.yaml:3: upstreams.api.maxConnectionsPerEndpoint: expected an integer, got 'many'",
            "config.yaml:5: routes[0].match: expected a mapping, got a single value",
            "config.yaml:6: routes[1].upstream: expected a string, got a list",
            "config.yaml:6: routes[1].forwardAssertionHeaders: expected true or false, got '\"true\"'",
            "config.yaml:7: limits.maxConcurrentStreams: expected an integer, got '1.5'",
        ].map { $0.replacingOccurrences(of: "'\"true\"'", with: "'true'") })
    }

    @Test func badDurationsAndSizes() {
        let yaml = minimalYAML + """
            attestation: {challengeTTL: 120, clockSkew: 1d}
            store2: null
            limits: {maxHeaderListBytes: 64KB, maxRequestBodyBytes: -1}
            upstreams2: null

            """
        let errs = errors(yaml)
        #expect(errs.contains("config.yaml:8: attestation.challengeTTL: duration '120' needs a unit (ms, s, m, h)"))
        #expect(errs.contains("config.yaml:8: attestation.clockSkew: unknown duration unit 'd' in '1d' (use ms, s, m, h)"))
        #expect(errs.contains("config.yaml:10: limits.maxHeaderListBytes: unknown size unit 'KB' in '64KB' (use B, KiB, MiB, GiB)"))
        #expect(errs.contains("config.yaml:10: limits.maxRequestBodyBytes: invalid size '-1' (expected e.g. 64KiB, 8MiB or a number of bytes)"))
        #expect(errs.contains("config.yaml:9: unknown key 'store2' at top level; did you mean 'store'?"))
        #expect(errs.count == 6)
        let zero = minimalYAML + "attestation: {challengeTTL: 0s}\n"
        #expect(errors(zero) == ["config.yaml:8: attestation.challengeTTL: must be greater than 0"])
    }

    @Test(arguments: [
        ("localhost", "expected host:port (IPv6 as [::1]:8443), got 'localhost'"),
        ("1.2.3.4:70000", "invalid port '70000' in '1.2.3.4:70000' (0-65535)"),
        ("300.1.1.1:80", "'300.1.1.1' is not an IPv4 address or host name"),
        ("::1:8443", "expected host:port (IPv6 as [::1]:8443), got '::1:8443'"),
        ("[::g]:8443", "'::g' is not an IPv6 address"),
        ("[::1]8443", "expected host:port (IPv6 as [::1]:8443), got '[::1]8443'"),
        ("host:", "invalid port '' in 'host:' (0-65535)"),
        ("bad_host:80", "'bad_host' is not an IPv4 address or host name"),
    ])
    func badListenerAddress(address: String, message: String) {
        let yaml = minimalYAML.replacingOccurrences(of: "{address: 127.0.0.1:8080}", with: "{address: \"\(address)\"}")
        #expect(errors(yaml) == ["config.yaml:1: listeners[0].address: \(message)"])
    }

    @Test func duplicateAndConflictingAddresses() {
        let yaml = minimalYAML.replacingOccurrences(
            of: "[{address: 127.0.0.1:8080}]", with: "[{address: 127.0.0.1:8080}, {address: 127.0.0.1:8080}]")
            + "admin: {address: 127.0.0.1:8080}\n"
        #expect(errors(yaml) == [
            "config.yaml:1: listeners[1].address: 127.0.0.1:8080 overlaps listeners[0] (127.0.0.1:8080): both cannot be bound",
            "config.yaml:8: admin.address: 127.0.0.1:8080 overlaps listeners[0] (127.0.0.1:8080): both cannot be bound",
        ])
    }

    /// Addresses that differ as text but cannot both be bound (a wildcard
    /// takes the port on every address; `::` on both families): refused
    /// here, not by serve's bind after check-config said OK.
    @Test(arguments: [
        ("0.0.0.0:8080", "127.0.0.1:8080"), ("\"[::]:8080\"", "0.0.0.0:8080"), ("localhost:8080", "127.0.0.1:8080"),
    ])
    func overlappingAddresses(first: String, second: String) {
        let yaml = minimalYAML.replacingOccurrences(
            of: "[{address: 127.0.0.1:8080}]", with: "[{address: \(first)}, {address: \(second)}]")
        #expect(errors(yaml).first?.contains("overlaps listeners[0]") == true, "\(errors(yaml))")
        let apart = minimalYAML.replacingOccurrences(
            of: "[{address: 127.0.0.1:8080}]", with: "[{address: 127.0.0.1:8080}, {address: 127.0.0.2:8080}]")
        #expect(errors(apart).isEmpty)
    }

    @Test func tlsFilesMustExist() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("notpem.crt", "hello\n")
        let yaml = minimalYAML.replacingOccurrences(
            of: "[{address: 127.0.0.1:8080}]",
            with: "[{address: 127.0.0.1:8443, tls: {certificate: notpem.crt, privateKey: missing.key}}]")
        #expect(errors(yaml, base: dir.path) == [
            "config.yaml:1: listeners[0].tls.certificate: '\(dir.path)/notpem.crt' holds no PEM CERTIFICATE",
            "config.yaml:1: listeners[0].tls.privateKey: cannot read '\(dir.path)/missing.key': No such file or directory",
        ])
        let noKey = minimalYAML.replacingOccurrences(
            of: "[{address: 127.0.0.1:8080}]", with: "[{address: 127.0.0.1:8443, tls: {certificate: notpem.crt}}]")
        #expect(errors(noKey, base: dir.path).contains("config.yaml:1: missing required key 'privateKey' in listeners[0].tls"))
        let anchors = minimalYAML + "attestation: {trustAnchors: [nope.pem]}\n"
        #expect(errors(anchors, base: dir.path) == [
            "config.yaml:8: attestation.trustAnchors[0]: cannot read '\(dir.path)/nope.pem': No such file or directory"
        ])
    }

    @Test(arguments: [
        ("redis://", "redis URL: '' is not an IPv4 address or host name"),
        ("http://127.0.0.1:6379", "'http://127.0.0.1:6379' must be a redis://[user:password@]host:port/db URL (rediss:// for TLS)"),
        ("rediss://h:6380/x", "redis database 'x' must be a number"),
        ("redis://h:6379/x", "redis database 'x' must be a number"),
        ("redis://u:p%zz@h:6379/0", "bad percent-encoding in the user info of the redis URL"),
        ("redis://h:99999/0", "redis URL: invalid port '99999' in 'h:99999' (0-65535)"),
        ("redis://h:6379/0?x=1", "redis database '0?x=1' must be a number"),
    ])
    func badRedisURL(url: String, message: String) {
        let yaml = minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{redis: {url: \"\(url)\"}}")
        #expect(errors(yaml) == ["config.yaml:3: store.redis.url: \(message)"])
    }

    @Test func redisURLForms() throws {
        #expect(try RedisURL.parse("redis://h").get() == RedisURL(host: "h", port: 6379, username: nil, password: nil, database: 0))
        #expect(try RedisURL.parse("redis://:pw@[::1]:7000/2").get()
            == RedisURL(host: "::1", port: 7000, username: nil, password: "pw", database: 2))
        let withPassword = try? RedisURL.parse("redis://user:hunter2@h:1/0").get()
        #expect(withPassword?.description == "redis://user:***@h:1/0")
        #expect(RedisURL.redacted("redis://user:hunter2@h:1/0") == "redis://***@h:1/0")
        let tls = try RedisURL.parse("rediss://user:hunter2@redis.internal:6380/1").get()
        #expect(tls == RedisURL(host: "redis.internal", port: 6380, username: "user", password: "hunter2", database: 1, tls: true))
        #expect(tls.description == "rediss://user:***@redis.internal:6380/1")
        #expect(try RedisURL.parse("redis://h").get().tls == false)
    }

    @Test func redisClusterSection() throws {
        func store(_ redis: String) -> String {
            minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{redis: \(redis)}")
        }
        let config = try load(store("{cluster: [redis://:pw@10.0.0.1:7000, 'redis://:pw@[::1]:7001'], commandTimeout: 100ms}"))
        guard case .redis(let redis) = config.store else {
            Issue.record("expected redis store")
            return
        }
        #expect(redis.cluster == ["redis://:pw@10.0.0.1:7000", "redis://:pw@[::1]:7001"])
        let client = try RedisClientConfiguration(redis)
        #expect(client.clusterSeeds == [RedisNodeAddress(host: "10.0.0.1", port: 7000), RedisNodeAddress(host: "::1", port: 7001)])
        #expect(client.url.password == "pw")
        #expect(client.commandTimeout == .milliseconds(100))
        let summary = ConfigSummary.render(config)
        #expect(summary.contains("store: redis cluster, seeds redis://:***@10.0.0.1:7000/0 redis://:***@[::1]:7001/0,"))
        #expect(!summary.contains("pw"))

        #expect(errors(store("{url: redis://h:1/0, cluster: [redis://h:2]}")) == [
            "config.yaml:3: store.redis: give either 'url' (one server) or 'cluster' (seed nodes), not both"
        ])
        #expect(errors(store("{cluster: []}")) == ["config.yaml:3: store.redis.cluster: give at least one seed node URL"])
        #expect(errors(store("{cluster: [redis://h:1/2]}")) == ["config.yaml:3: store.redis.cluster[0]: a cluster has only database 0"])
        #expect(errors(store("{cluster: [redis://h:1, rediss://h:2]}")) == [
            "config.yaml:3: store.redis.cluster[1]: every seed needs the same scheme and credentials as the first"
        ])
        #expect(errors(store("{cluster: [redis://:a@h:1, redis://:b@h:2]}")).count == 1)
        #expect(errors(store("{cluster: [http://h:1]}")).first?.hasPrefix("config.yaml:3: store.redis.cluster[0]: 'http://h:1' must be") == true)
        #expect(errors(store("{cluster: [redis://h:1], tls: {caFile: x}}")).contains(
            "config.yaml:3: store.redis.tls: only with a rediss:// url (the connection would not use TLS)"))
    }

    /// A client certificate, its key and a CA file (labels right, contents not loadable).
    private func clientTLSFiles(_ dir: TempDir) throws -> (cert: String, key: String, ca: String) {
        let (cert, key) = try dir.writeCertAndKey()
        return (cert, key, try dir.write("ca.pem", "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"))
    }

    @Test func redisTLSSection() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let (cert, key, ca) = try clientTLSFiles(dir)
        func store(_ redis: String) -> String {
            minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{redis: \(redis)}")
        }
        let full = try load(store(
            "{url: rediss://redis.internal:6380/0, tls: {caFile: ca.pem, certificate: \(cert), privateKey: \(key), serverName: redis-1.internal}}"),
            base: dir.path)
        guard case .redis(let redis) = full.store else {
            Issue.record("expected redis store")
            return
        }
        let expected = ClientTLSConfig(caFile: ca, certificate: cert, privateKey: key, serverName: "redis-1.internal")
        #expect(redis.tls == expected)
        #expect(redis.endpoint?.tls == true)
        // rediss:// alone: the system trust store and the URL's host.
        guard case .redis(let bare) = try load(store("{url: rediss://redis.internal:6380/0}")).store else {
            Issue.record("expected redis store")
            return
        }
        #expect(bare.tls == nil)

        #expect(errors(store("{url: redis://h:6379/0, tls: {caFile: \(ca)}}")) == [
            "config.yaml:3: store.redis.tls: only with a rediss:// url (the connection would not use TLS)"
        ])
        #expect(errors(store("{url: rediss://h:6380/0, tls: {certificate: \(cert)}}")) == [
            "config.yaml:3: store.redis.tls: give both 'certificate' and 'privateKey' (a client certificate), or neither"
        ])
        #expect(errors(store("{url: rediss://h:6380/0, tls: {caFile: \(dir.path)/nope.pem}}")) == [
            "config.yaml:3: store.redis.tls.caFile: cannot read '\(dir.path)/nope.pem': No such file or directory"
        ])
        #expect(errors(store("{url: rediss://h:6380/0, tls: {serverName: 'a b'}}")) == [
            "config.yaml:3: store.redis.tls.serverName: 'a b' is not a host name or IP address (no brackets or port)"
        ])
        #expect(errors(store("{url: rediss://h:6380/0, tls: {verify: false}}")) == [
            "config.yaml:3: unknown key 'verify' in store.redis.tls"
        ])
    }

    @Test func storeNeedsExactlyOneBackend() {
        let both = minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{memory: {}, redis: {}}")
        #expect(errors(both) == ["config.yaml:3: store: give exactly one of 'redis' or 'memory'"])
        let none = minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{}")
        #expect(errors(none) == ["config.yaml:3: store: give exactly one of 'redis' or 'memory'"])
        let memoryWithKeys = minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{memory: {size: 1}}")
        #expect(errors(memoryWithKeys) == ["config.yaml:3: unknown key 'size' in store.memory"])
        let zero = minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{redis: {connectionsPerWorker: 0, commandTimeout: 0ms}}")
        #expect(errors(zero) == [
            "config.yaml:3: store.redis.commandTimeout: must be greater than 0",
            "config.yaml:3: store.redis.connectionsPerWorker: must be at least 1, got 0",
        ])
    }

    @Test func missingRequiredSections() {
        #expect(errors("logging: {level: info}\n") == [
            "config.yaml:1: missing required key 'listeners' at top level",
            "config.yaml:1: missing required key 'apps' at top level",
            "config.yaml:1: missing required key 'upstreams' at top level",
            "config.yaml:1: missing required key 'routes' at top level",
        ])
        let emptyLists = """
            listeners: []
            apps: []
            upstreams: {}
            routes: []
            """
        #expect(errors(emptyLists) == [
            "config.yaml:1: listeners: at least one listener is required",
            "config.yaml:2: apps: at least one app is required",
            "config.yaml:3: upstreams: at least one upstream is required",
            "config.yaml:4: routes: at least one route is required",
        ])
        #expect(errors("") == ["config.yaml: the file is empty"])
    }

    @Test func routeChecks() {
        let yaml = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            limits: {maxRequestBodyBytes: 1MiB}
            routes:
              - {match: {prefix: /a}, upstream: nope, mode: enforce}
              - {match: {prefix: /b}, upstream: api, mode: enforce, maxBodyBytes: 2MiB}
              - {match: {prefix: /c, exact: /c}, upstream: api, mode: enforce}
              - {match: {regex: "^/d"}, upstream: api, mode: enforce}
              - {match: {prefix: /e, methods: []}, upstream: api, mode: enforce, challenge: maybe}
              - {match: {prefix: /f, methods: ["GE T"]}, upstream: api, mode: enforce, onStoreError: drop, maxRiskMetric: -1}
              - {match: {prefix: "/g h"}, upstream: api}
            """
        #expect(errors(yaml) == [
            "config.yaml:6: routes[0].upstream: no upstream named 'nope' (known: api)",
            "config.yaml:7: routes[1].maxBodyBytes: 2MiB exceeds limits.maxRequestBodyBytes (1MiB)",
            "config.yaml:8: routes[2].match: give exactly one of 'prefix' or 'exact'",
            "config.yaml:9: routes[3].match.regex: regex matching is not supported yet (use prefix or exact)",
            "config.yaml:10: routes[4].match.methods: must not be empty (omit it for any method)",
            "config.yaml:10: routes[4].challenge: expected one of required, none, got 'maybe'",
            "config.yaml:11: routes[5].match.methods[0]: 'GE T' is not a valid method",
            "config.yaml:11: routes[5].onStoreError: expected one of reject, forward, got 'drop'",
            "config.yaml:11: routes[5].maxRiskMetric: must be at least 0, got -1",
            "config.yaml:12: routes[6].match.prefix: '/g h' contains a space, control, '#' or non-ASCII character",
            "config.yaml:12: missing required key 'mode' in routes[6]",
        ])
    }

    @Test func upstreamChecks() {
        let yaml = minimalYAML.replacingOccurrences(
            of: "{api: {endpoints: [http://127.0.0.1:9001]}}",
            with: "{api: {endpoints: [\"https://a:1/x\", \"http://a:1/path\", ftp://x, \"http://a:0\"], idleTimeout: 0s}, \"bad name\": {endpoints: [http://a:1]}, empty: {endpoints: []}}")
        #expect(errors(yaml) == [
            "config.yaml:4: upstreams.api.endpoints[0]: 'https://a:1/x' must be https://host:port without user, path or query",
            "config.yaml:4: upstreams.api.endpoints[1]: 'http://a:1/path' must be http://host:port without user, path or query",
            "config.yaml:4: upstreams.api.endpoints[2]: 'ftp://x' must be an http://, https://, h2c:// or h2:// URL (host and port)",
            "config.yaml:4: upstreams.api.endpoints[3]: 'http://a:0': port must not be 0",
            "config.yaml:4: upstreams.api.idleTimeout: must be greater than 0",
            "config.yaml:4: upstreams: names must be letters, digits, '-', '_' or '.'",
            "config.yaml:4: upstreams.empty.endpoints: at least one endpoint is required",
        ])
    }

    @Test func httpsUpstreams() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let (cert, key, ca) = try clientTLSFiles(dir)
        func upstreams(_ text: String) -> String {
            minimalYAML.replacingOccurrences(of: "{api: {endpoints: [http://127.0.0.1:9001]}}", with: text)
        }
        let full = try load(upstreams(
            "{api: {endpoints: [https://api.internal, \"https://[::1]:8443\"], tls: {caFile: ca.pem, certificate: \(cert), privateKey: \(key), serverName: api.internal}}}"),
            base: dir.path)
        let api = try #require(full.upstreams["api"])
        #expect(api.endpoints == [
            UpstreamEndpoint(host: "api.internal", port: 443, tls: true), UpstreamEndpoint(host: "::1", port: 8443, tls: true),
        ])
        #expect(api.endpoints.map(\.description) == ["https://api.internal:443", "https://[::1]:8443"])
        let expected = ClientTLSConfig(caFile: ca, certificate: cert, privateKey: key, serverName: "api.internal")
        #expect(api.tls == expected)
        // https:// alone: the system trust store and each endpoint's host.
        let bare = try load(upstreams("{api: {endpoints: [https://api.internal:8443]}}"))
        #expect(bare.upstreams["api"]?.tls == nil)
        #expect(bare.upstreams["api"]?.endpoints.first?.tls == true)

        #expect(errors(upstreams("{api: {endpoints: [http://a:1, https://b:1]}}")) == [
            "config.yaml:4: upstreams.api.endpoints: mixes http:// and https:// endpoints; use one scheme per upstream"
        ])
        #expect(errors(upstreams("{api: {endpoints: [http://a:1], tls: {caFile: \(ca)}}}")) == [
            "config.yaml:4: upstreams.api.tls: only with https:// or h2:// endpoints (the connections would not use TLS)"
        ])
        #expect(errors(upstreams("{api: {endpoints: [https://a:1], tls: {privateKey: \(key)}}}")) == [
            "config.yaml:4: upstreams.api.tls: give both 'certificate' and 'privateKey' (a client certificate), or neither"
        ])
        #expect(errors(upstreams("{api: {endpoints: [https://a:1], tls: {caFile: \(dir.path)/nope.pem}}}")) == [
            "config.yaml:4: upstreams.api.tls.caFile: cannot read '\(dir.path)/nope.pem': No such file or directory"
        ])
        #expect(errors(upstreams("{api: {endpoints: [https://a:1], tls: {verify: false}}}")).first?.contains("verify") == true)
        for name in ["'[::1]'", "'api.internal:443'", "'a b'"] {
            #expect(errors(upstreams("{api: {endpoints: [https://a:1], tls: {serverName: \(name)}}}")).first?.hasSuffix(
                "is not a host name or IP address (no brackets or port)") == true, "\(name)")
        }
        #expect(try load(upstreams("{api: {endpoints: [https://a:1], tls: {serverName: '::1'}}}")).upstreams["api"]?.tls?.serverName == "::1")
    }

    @Test func http2Upstreams() throws {
        func upstreams(_ text: String) -> String {
            minimalYAML.replacingOccurrences(of: "{api: {endpoints: [http://127.0.0.1:9001]}}", with: text)
        }
        let c = try load(upstreams("{api: {endpoints: [http://127.0.0.1:9001]}, grpc: {endpoints: [h2c://svc:50051, 'h2c://[::1]:50052'], maxStreamsPerConnection: 50}, tls2: {endpoints: [h2://svc]}}"))
        let grpc = try #require(c.upstreams["grpc"])
        #expect(grpc.endpoints.map(\.description) == ["h2c://svc:50051", "h2c://[::1]:50052"])
        #expect(grpc.isHTTP2 && !grpc.endpoints[0].tls)
        #expect(grpc.maxStreamsPerConnection == 50)
        // maxConnectionsPerClient counts streams here: half of 64 connections × 50 streams.
        #expect(grpc.inFlightCapacity == 64 * 50)
        #expect(grpc.effectiveMaxConnectionsPerClient == 1600)
        #expect(c.upstreams["tls2"]?.endpoints == [UpstreamEndpoint(host: "svc", port: 443, scheme: .h2)])
        #expect(c.upstreams["tls2"]?.endpoints.first?.tls == true)
        #expect(errors(upstreams("{api: {endpoints: [h2c://a:1, http://b:1]}}")) == [
            "config.yaml:4: upstreams.api.endpoints: mixes h2c:// and http:// endpoints; use one scheme per upstream"
        ])
        #expect(errors(upstreams("{api: {endpoints: [h2c://a:1], tls: {serverName: a}}}")) == [
            "config.yaml:4: upstreams.api.tls: only with https:// or h2:// endpoints (the connections would not use TLS)"
        ])
        #expect(errors(upstreams("{api: {endpoints: [http://a:1], maxStreamsPerConnection: 10}}")) == [
            "config.yaml:4: upstreams.api.maxStreamsPerConnection: only with h2c:// or h2:// endpoints (HTTP/1.1 carries one request per connection)"
        ])
        #expect(errors(upstreams("{api: {endpoints: [h2c://a:1], maxConnectionsPerEndpoint: 2, maxStreamsPerConnection: 3, maxConnectionsPerClient: 7}}")) == [
            "config.yaml:4: upstreams.api.maxConnectionsPerClient: 7 exceeds maxConnectionsPerEndpoint × maxStreamsPerConnection (6)"
        ])
        #expect(errors(upstreams("{api: {endpoints: ['h2c://a:1/x']}}")) == [
            "config.yaml:4: upstreams.api.endpoints[0]: 'h2c://a:1/x' must be h2c://host:port without user, path or query"
        ])
    }

    @Test func appIdAndEnvironmentChecks() {
        let yaml = minimalYAML.replacingOccurrences(
            of: "[{appId: ABCDE12345.com.example.app, environments: [development]}]",
            with: "[{appId: abcde12345.com.x}, {appId: ABCDE12345}, {appId: ABCDE12345.com..x}, {appId: ABCDE12345.com.x, environments: [staging]}, {appId: ABCDE12345.com.x}, {environments: []}]")
        #expect(errors(yaml) == [
            "config.yaml:2: apps[0].appId: team id 'abcde12345' in 'abcde12345.com.x' must be 10 characters of A-Z and 0-9",
            "config.yaml:2: apps[1].appId: 'ABCDE12345' is not TEAMID.bundleID",
            "config.yaml:2: apps[2].appId: bundle id 'com..x' in 'ABCDE12345.com..x' must be dot-separated letters, digits and '-'",
            "config.yaml:2: apps[3].environments[0]: expected production or development, got 'staging'",
            "config.yaml:2: apps[4].appId: 'ABCDE12345.com.x' is already listed as apps[3]",
            "config.yaml:2: missing required key 'appId' in apps[5]",
            "config.yaml:2: apps[5].environments: must not be empty",
        ])
    }

    /// A section written as one value is often a secret or a URL with a
    /// password: the errors (logged, and answered to `POST /reload`) never
    /// repeat it.
    @Test func errorsNeverRepeatASecretWrittenInTheWrongShape() {
        let base = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]

            """
        for (extra, secret) in [
            ("admin: s3cretAdminTok\n", "s3cretAdminTok"),
            ("trust: MySigningSecret\n", "MySigningSecret"),
            ("store: {redis: \"redis://:Hunter2Secret@127.0.0.1:6379/0\"}\n", "Hunter2Secret"),
            ("store: {redis: {cluster: \"redis://:ClusterPw@127.0.0.1:7000\"}}\n", "ClusterPw"),
            ("store: {redis: {url: \"redis:/:Hunter3Secret@127.0.0.1:6379\"}}\n", "Hunter3Secret"),
        ] {
            let errs = errors(base + extra)
            #expect(!errs.isEmpty, "\(extra)")
            #expect(errs.allSatisfy { !$0.contains(secret) }, "\(errs)")
        }
    }

    @Test func attestationChecks() {
        let yaml = minimalYAML + """
            attestation:
              prefix: api
              challengeRate: {perSecond: 0, burst: 0}
              headers: {keyId: "Bad Header", assertion: X-AssertGate-Assertion, challenge: "x-assertgate-assertion"}

            """
        #expect(errors(yaml) == [
            "config.yaml:9: attestation.prefix: 'api' must start with '/'",
            "config.yaml:10: attestation.challengeRate.perSecond: must be greater than 0, got 0",
            "config.yaml:10: attestation.challengeRate.burst: must be at least 1, got 0",
            "config.yaml:11: attestation.headers.keyId: 'Bad Header' is not a valid header name",
            "config.yaml:11: attestation.headers.assertion: 'X-AssertGate-Assertion' starts with trust.headerPrefix 'X-AssertGate-' and would be stripped",
            "config.yaml:11: attestation.headers.challenge: 'x-assertgate-assertion' starts with trust.headerPrefix 'X-AssertGate-' and would be stripped",
        ])
        // A rate so slow that its waits overflow (a crash, a Redis TTL in exponent form) is refused.
        #expect(errors(minimalYAML + "attestation: {rampUp: {perSecond: 1e-300, burst: 2000000000}}\n") == [
            "config.yaml:8: attestation.rampUp.perSecond: must be at least 1e-05, got 1e-300",
            "config.yaml:8: attestation.rampUp.burst: must be at most 1000000000, got 2000000000",
        ])
        #expect(errors(minimalYAML + "attestation: {challengeRate: {perSecond: 0.00001, burst: 1}}\n").isEmpty)
        var slow = TokenBucket(perSecond: 1e-300, burst: 1, nowNanos: 0)
        #expect(slow.take(nowNanos: 0) == .allowed)
        #expect(slow.take(nowNanos: 0) == .limited(retryAfterSeconds: 2_592_000), "no trap converting the wait")
        #expect(errors(minimalYAML + "trust: {headerPrefix: AssertGate-}\nattestation: {headers: {keyId: K-Id}}\n") == [
            "config.yaml:8: trust.headerPrefix: 'AssertGate-' would strip the header AssertGate-Assertion; rename attestation.headers.assertion",
            "config.yaml:8: trust.headerPrefix: 'AssertGate-' would strip the header AssertGate-Challenge; rename attestation.headers.challenge",
            "config.yaml:8: trust.headerPrefix: 'AssertGate-' would strip the header AssertGate-Device-Token; rename attestation.headers.deviceToken",
        ])
        #expect(errors(minimalYAML + "attestation: {prefix: /x/}\n") == [
            "config.yaml:8: attestation.prefix: '/x/' must not end with '/'"
        ])
    }

    /// risk.md §4: absent = no limit; the same checks as any rate.
    @Test func attestationRampUp() throws {
        #expect(try load(minimalYAML).attestation.rampUp == nil)
        let c = try load(minimalYAML + "attestation: {rampUp: {perSecond: 0.5, burst: 100}}\n")
        #expect(c.attestation.rampUp == RateConfig(perSecond: 0.5, burst: 100))
        #expect(ConfigSummary.render(c).contains("  rampUp: 0.5/s burst 100 attest challenges, shared by every gateway on the store"))
        #expect(c.warnings.contains { $0.hasPrefix("attestation.rampUp with store memory") })
        #expect(ConfigSummary.render(try load(minimalYAML)).contains("  rampUp: off"))
        #expect(errors(minimalYAML + "attestation: {rampUp: {perSecond: 0, burst: 0}}\n") == [
            "config.yaml:8: attestation.rampUp.perSecond: must be greater than 0, got 0",
            "config.yaml:8: attestation.rampUp.burst: must be at least 1, got 0",
        ])
        #expect(errors(minimalYAML + "attestation: {rampUp: {perSecond: 5}}\n") == [
            "config.yaml:8: missing required key 'burst' in attestation.rampUp"
        ])
        #expect(errors(minimalYAML + "attestation: {rampUp: 50}\n") == [
            "config.yaml:8: attestation.rampUp: expected a mapping, got a single value"
        ])
        #expect(errors(minimalYAML + "attestation: {rampUp: {perSecond: 5, burst: 5, perMinute: 1}}\n").count == 1)
    }

    @Test func trustFraudMetricAndLoggingChecks() {
        let yaml = minimalYAML + """
            trust: {headerPrefix: "X Gate", signingSecret: {env: MISSING_SECRET}}
            fraudMetric: {teamId: abc, keyId: XYZ1234567, baseURL: "http://data.appattest.apple.com", refreshEvery: 0s}
            logging: {level: loud, format: yaml}

            """
        #expect(errors(yaml) == [
            "config.yaml:8: trust.headerPrefix: 'X Gate' is not a valid header name prefix",
            "config.yaml:8: trust.signingSecret.env: environment variable MISSING_SECRET is not set",
            "config.yaml:9: fraudMetric.teamId: 'abc' must be 10 characters of A-Z and 0-9",
            "config.yaml:9: missing required key 'privateKey' in fraudMetric",
            "config.yaml:9: fraudMetric.baseURL: 'http://data.appattest.apple.com' must be an https:// URL",
            "config.yaml:9: fraudMetric.refreshEvery: must be greater than 0",
            "config.yaml:10: logging.level: expected one of trace, debug, info, notice, warning, error, critical, got 'loud'",
            "config.yaml:10: logging.format: expected one of json, text, got 'yaml'",
        ])
    }

    @Test func secretSources() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("tok", "abc\n\n")
        try dir.write("empty", "\n")
        let ok = try load(minimalPlus("admin: {token: {file: tok}}\ntrust: {signingSecret: {env: S}}\n"), env: ["S": "env-value"], base: dir.path)
        #expect(ok.admin.token?.value == "abc")
        #expect(ok.trust.signingSecret?.value == "env-value")
        #expect(errors(minimalPlus("admin: {token: {file: nope}}\n"), base: dir.path) == [
            "config.yaml:8: admin.token.file: cannot read '\(dir.path)/nope': No such file or directory"
        ])
        #expect(errors(minimalPlus("admin: {token: {file: empty}}\n"), base: dir.path) == [
            "config.yaml:8: admin.token.file: '\(dir.path)/empty' is empty"
        ])
        #expect(errors(minimalPlus("admin: {token: {file: tok, env: X}}\n"), base: dir.path) == [
            "config.yaml:8: admin.token: give exactly one of 'file' or 'env' (or an inline string)"
        ])
        #expect(errors(minimalPlus("admin: {token: {vault: x}}\n")).first == "config.yaml:8: unknown key 'vault' in admin.token")
        #expect(errors(minimalPlus("admin: {token: [a]}\n")) == [
            "config.yaml:8: admin.token: expected a string, {file: PATH} or {env: NAME}, got a list"
        ])
        #expect(errors(minimalPlus("trust: {signingSecret: {env: EMPTY}}\n"), env: ["EMPTY": ""]) == [
            "config.yaml:8: trust.signingSecret.env: environment variable EMPTY is empty"
        ])
    }

    @Test func secretsNeverPrintTheirValue() throws {
        let c = try load(minimalPlus("admin: {token: hunter2-token}\n"))
        let token = try #require(c.admin.token)
        #expect(!"\(token)".contains("hunter2"))
        #expect(!String(reflecting: token).contains("hunter2"))
        var dumped = ""
        dump(token, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(!ConfigSummary.render(c).contains("hunter2"))
    }

    @Test func allErrorsAreCollectedInLineOrder() {
        let yaml = """
            listeners: [{address: nope}]
            apps: [{appId: X}]
            upstreams: {api: {endpoints: [ftp://x]}}
            routes: [{match: {prefix: /}, upstream: api, mode: enforce, extra: 1}]
            logging: {level: x}
            """
        let errs = errors(yaml)
        #expect(errs.count == 5)
        #expect(errs.map { $0.split(separator: ":")[1] } == ["1", "2", "3", "4", "5"])
    }

    @Test func yamlSyntaxAndDuplicateKeys() {
        let broken = "listeners: [{address: 127.0.0.1:8080}\napps: x\n"
        let errs = errors(broken)
        #expect(errs.count == 1)
        #expect(errs.first?.hasPrefix("config.yaml:2:") == true)
        #expect(errs.first?.contains(": YAML syntax error") == true)
        // The repeat is the line to fix; the first occurrence is named beside it.
        let dup = minimalYAML + "logging: {level: info}\nlogging: {level: debug}\n"
        #expect(errors(dup) == ["config.yaml:9: duplicate key 'logging' (first at line 8)"])
    }

    @Test func aTabIsNamedWithItsLineAndColumn() {
        let yaml = """
            listeners: [{address: 127.0.0.1:8080}]
            apps:
            \t- {appId: ABCDE12345.com.example.app}
            """
        let errs = errors(yaml)
        #expect(errs.count == 1)
        let line = errs.first ?? ""
        #expect(line.hasPrefix("config.yaml:3:1: YAML syntax error: "), "\(line)")
        #expect(line.hasSuffix("(the character there is a tab: YAML indents with spaces only, replace it with spaces)"), "\(line)")
        // A tab further along a line: the column counts characters from 1.
        let inner = "listeners: [{address: 127.0.0.1:8080}]\nstore:\n  memory: {}\n  \tredis: {}\n"
        let innerErrs = errors(inner)
        #expect(innerErrs.count == 1)
        #expect(innerErrs.first?.hasPrefix("config.yaml:4:3: YAML syntax error: ") == true, "\(innerErrs)")
        #expect(innerErrs.first?.contains("the character there is a tab") == true, "\(innerErrs)")
    }

    @Test func otherOffendingCharactersAreNamed() {
        // '@' cannot start a plain scalar; a stray control character is invisible.
        let at = errors("listeners: [{address: 127.0.0.1:8080}]\nlogging: {level: @info}\n")
        #expect(at.count == 1)
        #expect(at.first?.hasPrefix("config.yaml:2:18: YAML syntax error: ") == true, "\(at)")
        #expect(at.first?.hasSuffix("(the character there is '@')") == true, "\(at)")
    }

    @Test func duplicateKeysAreReportedOnTheLineOfTheRepeat() {
        let nested = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            store: {memory: {}}
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes:
              - match: {prefix: /api/}
                upstream: api
                # a comment between them
                mode: enforce
                upstream: other
              - {match: {prefix: /}, upstream: api, mode: passthrough}
            """
        #expect(errors(nested) == ["config.yaml:10: duplicate key 'upstream' (first at line 7)"])
        let flow = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            store: {memory: {}}
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes:
              - {match: {prefix: /}, upstream: api,
                 mode: passthrough, mode: enforce}
            """
        #expect(errors(flow) == ["config.yaml:7: duplicate key 'mode' (first at line 7)"])
    }

    @Test func duplicateKeyLinesStayInsideTheFile() {
        // Odd spellings must still give a line of the file (the repeat's, or the first's).
        let variants = [
            "a: 1\na: 2\n",
            "a: 1\r\na: 2\r\n",
            "\"a\": 1\n'a': 2\n",
            "{a: 1, a: 2}",
            "{a: 1,\n a: 2}\n",
            "x:\n  - {a: 1, b: {a: 3}, a: 2}\n",
            "x:\n  y: 1\n  # y: 0\n\n  y: 2\n",
            "é: 1\né: 2\n",
            "? a\n: 1\n? a\n: 2\n",
            "- &k a: 1\n  *k : 2\n",
        ]
        for yaml in variants {
            let lineCount = yaml.split(separator: "\n", omittingEmptySubsequences: false).count
            let errs: [ConfigDiagnostic]
            do {
                _ = try ConfigLoader(environment: [:]).load(yaml: yaml, filename: "config.yaml")
                errs = []
            } catch {
                errs = error.diagnostics
            }
            #expect(!errs.isEmpty, "\(yaml.debugDescription)")
            for e in errs {
                #expect((1...lineCount).contains(e.line ?? 0), "\(yaml.debugDescription): \(e)")
            }
        }
        #expect(errors("x:\n  y: 1\n  # y: 0\n\n  y: 2\n") == ["config.yaml:5: duplicate key 'y' (first at line 2)"])
    }

    @Test func unknownKeysSuggestTheNearestKnownOne() {
        let yaml = minimalYAML + """
            lmits: {}
            admin: {adress: 127.0.0.1:1, tokn: x}
            attestation: {headers: {keyid: X}}
            logging: {format: json, frobnicate: true}

            """
        #expect(errors(yaml) == [
            "config.yaml:8: unknown key 'lmits' at top level; did you mean 'limits'?",
            "config.yaml:9: unknown key 'adress' in admin; did you mean 'address'?",
            "config.yaml:9: unknown key 'tokn' in admin; did you mean 'token'?",
            "config.yaml:10: unknown key 'keyid' in attestation.headers; did you mean 'keyId'?",
            "config.yaml:11: unknown key 'frobnicate' in logging",
        ])
    }

    @Test func editDistanceCountsASwapAsOneEdit() {
        #expect(KeySuggestion.distance("mdoe", "mode") == 1)
        #expect(KeySuggestion.distance("adress", "address") == 1)
        #expect(KeySuggestion.distance("", "mode") == 4)
        #expect(KeySuggestion.distance("mode", "mode") == 0)
        #expect(KeySuggestion.distance("kitten", "sitting") == 3)
        #expect(KeySuggestion.closest(to: "mdoe", in: ["mode", "match", "upstream"]) == "mode")
        // Short keys get one edit at most: "xy" is not a typo of "ab".
        #expect(KeySuggestion.closest(to: "xy", in: ["ab", "mode"]) == nil)
        #expect(KeySuggestion.closest(to: "colour", in: ["color", "level"]) == "color")
        #expect(KeySuggestion.closest(to: "zzzzzz", in: ["color", "level"]) == nil)
    }

    @Test func aliasBombIsBounded() {
        var yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for i in 1..<8 {
            yaml += "a\(i): &a\(i) [" + Array(repeating: "*a\(i - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        #expect(errors(yaml) == ["config.yaml: more than 100000 YAML nodes (alias expansion?)"])
    }

    /// An alias used as a mapping key: Yams hashes each key while it
    /// composes, so the expanded tree cost its whole size before the composed
    /// file was counted (a hang). Counted on the parser's events first.
    @Test func anAliasBombUsedAsAKeyIsRefusedBeforeComposing() {
        var yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for i in 1..<9 {
            yaml += "a\(i): &a\(i) [" + Array(repeating: "*a\(i - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        yaml += "*a8: 1\n"
        let started = ContinuousClock.now
        #expect(errors(yaml) == ["config.yaml: more than 100000 YAML nodes (alias expansion?)"])
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    /// Past these bounds a value traps converting or summing at run time.
    @Test func durationsAndNumbersHaveUpperBounds() {
        #expect(errors(minimalPlus("limits: {requestBodyTimeout: 744h}\n")).first?.contains("at most 30 days") == true)
        #expect(errors(minimalPlus("limits: {streamResetRate: {perSecond: 1e20, burst: 10}}\n")).first?
            .contains("at most 1000000000") == true)
        #expect(errors(minimalPlus("limits: {requestBodyTimeout: 720h}\n")).isEmpty)
    }

    /// The device-token header, like the assertion headers, must not fall
    /// under a custom trust prefix (it would be stripped before it is read).
    @Test func aTrustPrefixThatWouldStripTheDeviceTokenIsAnError() {
        let e = errors(minimalPlus("""
            trust: {headerPrefix: AssertGate-}
            attestation:
              headers: {keyId: X-Key-Id, assertion: X-Assertion, challenge: X-Challenge}

            """))
        #expect(e.contains { $0.contains("AssertGate-Device-Token") && $0.contains("attestation.headers.deviceToken") }, "\(e)")
    }

    @Test func unreadableConfigFile() {
        #expect(throws: ConfigError(diagnostics: [
            ConfigDiagnostic(file: "/nonexistent/config.yaml", line: nil,
                message: "cannot read '/nonexistent/config.yaml': No such file or directory")
        ])) {
            try ConfigLoader.load(path: "/nonexistent/config.yaml")
        }
    }
}

@Suite struct ConfigWarningTests {
    /// A bound body larger than the worker's buffering budget can never be
    /// buffered: check-config says so.
    @Test func aBoundBodyOverTheBufferBudgetIsWarned() throws {
        let config = try load(minimalYAML.replacingOccurrences(
            of: "- {match: {prefix: /api/}, upstream: api, mode: enforce}",
            with: "- {match: {prefix: /api/}, upstream: api, mode: enforce, maxBodyBytes: 2MiB}")
            + "limits: {maxBufferedBodyBytes: 1MiB}\n")
        #expect(config.warnings.contains { $0.hasPrefix("routes[0].maxBodyBytes 2MiB is over limits.maxBufferedBodyBytes 1MiB") },
                "\(config.warnings)")
        let fits = try load(minimalYAML + "limits: {maxBufferedBodyBytes: 1MiB}\n")
        #expect(!fits.warnings.contains { $0.contains("maxBufferedBodyBytes") })
    }

    @Test func riskySettingsAreWarned() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        _ = try dir.writeCertAndKey()
        let yaml = minimalYAML + """
            admin: {address: 0.0.0.0:9901, token: inline}
            attestation: {trustAnchors: [certs/tls.crt]}

            """
        let warnings = try load(yaml, base: dir.path).warnings
        #expect(warnings == [
            "attestation.trustAnchors REPLACE Apple's App Attestation Root CA: for testing only",
            "admin.address 0.0.0.0:9901 is not loopback: /metrics and /readyz are exposed without a token",
            "admin.token is inline in the config file; prefer {file: PATH} or {env: NAME}",
            "store is memory: keys and counters live in this process only and are lost on restart",
        ])
        let quiet = minimalYAML.replacingOccurrences(of: "{memory: {}}", with: "{redis: {}}")
        #expect(try load(quiet).warnings.isEmpty)
    }

    @Test func methodsThatFallThroughToALaxerRouteAreWarned() throws {
        let yaml = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            store: {redis: {}}
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes:
              - {match: {prefix: /api/payments, methods: [POST]}, upstream: api, mode: enforce}
              - {match: {exact: /api/account, methods: [GET]}, upstream: api, mode: enforce}
              - {match: {exact: /api/account, methods: [PUT, DELETE]}, upstream: api, mode: enforce}
              - {match: {prefix: /api/}, upstream: api, mode: monitor}
              - {match: {prefix: /admin, methods: [POST]}, upstream: api, mode: monitor}
              - {match: {prefix: /admin, methods: [GET]}, upstream: api, mode: passthrough}
              - {match: {prefix: /}, upstream: api, mode: enforce}

            """
        #expect(try load(yaml).warnings == [
            "routes[0] (enforce, methods POST): requests with other methods on its paths go to routes[3] (monitor)",
            // PUT and DELETE stay enforced by routes[2]; the rest falls to /api/.
            "routes[1] (enforce, methods GET): requests with other methods on its paths go to routes[3] (monitor)",
            "routes[2] (enforce, methods DELETE,PUT): requests with other methods on its paths go to routes[3] (monitor)",
            // GET is passed through; the others reach the strict catch-all: no line for them.
            "routes[4] (monitor, methods POST): GET requests on its paths go to routes[5] (passthrough)",
        ])
    }

    @Test func maxRiskMetricWithoutFraudMetricIsWarned() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("AuthKey.p8", "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n")
        let yaml = minimalYAML
            .replacingOccurrences(of: "{memory: {}}", with: "{redis: {}}")
            .replacingOccurrences(of: "mode: enforce}", with: "mode: enforce, maxRiskMetric: 5}")
        #expect(try load(yaml, base: dir.path).warnings == [
            "routes[0].rules.require.maxRiskMetric (or its old spelling routes[0].maxRiskMetric) has no effect without fraudMetric: keys get a risk metric only from refreshed receipts"
        ])
        let refreshing = yaml + "fraudMetric: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {file: AuthKey.p8}}\n"
        #expect(try load(refreshing, base: dir.path).warnings.isEmpty)
    }

    @Test func fraudMetricKeys() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try dir.write("AuthKey.p8", "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n")
        let ca = try dir.write("apple-ca.pem", "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
        func fraud(_ extra: String) -> String {
            minimalYAML + "fraudMetric: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {file: AuthKey.p8}\(extra)}\n"
        }
        let defaults = try #require(try load(fraud(""), base: dir.path).fraudMetric)
        #expect(defaults.baseURL == "https://data.appattest.apple.com")
        #expect(defaults.developmentBaseURL == "https://data-development.appattest.apple.com")
        #expect(defaults.refreshEvery == .hours(24))
        #expect(defaults.pollEvery == .seconds(30))
        #expect(defaults.caFile == nil)
        let set = try #require(try load(
            fraud(", baseURL: https://data-development.appattest.apple.com, developmentBaseURL: https://proxy.internal:8443/, refreshEvery: 12h, pollEvery: 5s, caFile: apple-ca.pem"),
            base: dir.path).fraudMetric)
        #expect(set.baseURL == "https://data-development.appattest.apple.com")
        #expect(set.developmentBaseURL == "https://proxy.internal:8443")
        #expect(set.refreshEvery == .hours(12))
        #expect(set.pollEvery == .seconds(5))
        #expect(set.caFile == ca)
        #expect(errors(fraud(", refreshEvery: 10s"), base: dir.path) == [
            "config.yaml:8: fraudMetric.refreshEvery: must be at least 1m"
        ])
        #expect(errors(fraud(", caFile: nope.pem"), base: dir.path) == [
            "config.yaml:8: fraudMetric.caFile: cannot read '\(dir.path)/nope.pem': No such file or directory"
        ])
    }
}
