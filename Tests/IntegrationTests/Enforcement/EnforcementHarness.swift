import AppleMock
import AssertGateCore
import AssertGateTestSupport
import DeviceSim
import Foundation
import Logging
import NIOHTTP1
import Verifier

/// The whole gateway as `assertgate serve` runs it (YAML file, real Redis,
/// admin listener) in front of a recording upstream, with DeviceSim playing
/// the app and curl as the HTTP/2 and HTTP/1.1 client.
final class EnforcementHarness: @unchecked Sendable {
    static let appId = "ABCDE12345.com.example.app"
    /// Allowed in production only: a development attestation is `environment-not-allowed`.
    static let productionOnlyAppId = "ABCDE12345.com.example.prodonly"
    static let signingSecret = "e2e-signing-secret"
    static let adminToken = "e2e-admin-token"
    static let prefix = "/assertgate/v1"

    let redis: RedisServerFixture
    let upstream: TestUpstream
    /// The `dead` upstream's port: held, so nothing answers on it.
    private let deadPort: ReservedPort
    private(set) var server: GatewayServer
    let directory: String
    let ca: TestCA
    let receiptCA: ReceiptCA
    let configPath: String
    /// With `Options.receiptRefresh`: the Apple data endpoint the gateway refreshes receipts with.
    let apple: AppleMockServer?
    /// With `Options.redisCluster`: the cluster the gateway stores into.
    let cluster: RedisClusterFixture?
    /// Its DeviceCheck key (PKCS#8 PEM), for checking the tokens it received.
    var deviceCheckKeyPath: String { directory + "/AuthKey_XYZ1234567.p8" }
    /// root.cert.pem and receipt-root.cert.pem of the test CAs.
    var caDirectory: String { directory + "/ca" }
    static let teamId = "ABCDE12345"
    static let deviceCheckKeyId = "XYZ1234567"

    var base: String { "http://127.0.0.1:\(server.ports[0])" }
    var adminBase: String { "http://127.0.0.1:\(server.adminPort)" }

    struct Options {
        var challengeRate = "{perSecond: 1000, burst: 1000}"
        /// `attestation.rampUp` (a YAML flow mapping); nil = none.
        var rampUp: String?
        /// Existing CA directory (root.cert.pem, receipt-root.cert.pem) instead of fresh CAs.
        var caDirectory: String?
        /// Redis behind TLS (client certificate required), reached with `rediss://`.
        var redisTLS = false
        /// `fraudMetric` pointing at a `AppleMockServer` (schedule polled every 50 ms).
        var receiptRefresh = false
        /// `deviceCheck:` pointing at the same `AppleMockServer` (timeout 400 ms),
        /// and the `/dc-…` routes of `deviceCheckRoutes`.
        var deviceCheck = false
        /// `deviceCheck.updateRetryFor`.
        var updateRetryFor = "1h"
        /// `deviceCheck.updatePollEvery` and `updateBatch` (nil: the defaults).
        var updatePollEvery: String?
        var updateBatch: Int?
        /// `deviceCheck.maxQueuedUpdates` (nil: the default).
        var maxQueuedUpdates: Int?
        /// `store.redis.commandTimeout` (single server).
        var commandTimeout = "250ms"
        /// Where the gateway logs (default: nowhere below critical).
        var log: RecordingLogHandler.Lines?
        /// A three-master Redis Cluster (`store.redis.cluster`) instead of one server.
        var redisCluster = false
        /// The fake Apple endpoint answers a connection's first request only
        /// and closes it at the next (`AppleMockServer.dropIdle`).
        var appleDropsKeptConnections = false
        /// `rules:` of the main app (`appId`), a YAML flow mapping (risk.md §2).
        var appRules: String?
        /// More `apps:` entries (flow mappings).
        var extraApps: [String] = []
        /// Routes (flow mappings) placed before the standard ones.
        var extraRoutes: [String] = []
        /// More `upstreams:` entries, each `name: {flow mapping}`.
        var extraUpstreams: [String] = []
        /// Top-level YAML appended to the file (`limits: {...}`).
        var extraTopLevel = ""
        /// Redis with `--requirepass`, the gateway given the password as
        /// `store.redis.password: {file: …}` (single server, no TLS).
        var redisPassword: String?
        /// Event loops of the gateway (1: every client connection shares one
        /// worker's upstream pools).
        var workers = 2
    }

    static func start(_ options: Options = Options()) async throws -> EnforcementHarness {
        let directory = NSTemporaryDirectory() + "assertgate-e2e-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let ca: TestCA
        let receiptCA: ReceiptCA
        let caDir = options.caDirectory ?? directory + "/ca"
        if let existing = options.caDirectory {
            ca = try TestCA.load(directory: existing)
            receiptCA = try ReceiptCA.load(directory: existing)
        } else {
            try FileManager.default.createDirectory(atPath: caDir, withIntermediateDirectories: true)
            ca = try TestCA()
            receiptCA = try ReceiptCA()
            try ca.save(to: caDir)
            try receiptCA.save(to: caDir)
        }
        let pki = options.redisTLS ? try await TestPKI.shared.value : nil
        let redis = try RedisServerFixture(
            extraArguments: options.redisPassword.map { ["--requirepass", $0] } ?? [],
            tls: pki?.redisServer(requireClientCertificate: true))
        let cluster = options.redisCluster ? try RedisClusterFixture() : nil
        let store: String
        if let cluster {
            store = "{cluster: [\(cluster.seedURLs.map { "\"\($0)\"" }.joined(separator: ", "))], connectTimeout: 1s, commandTimeout: 250ms}"
        } else if let pki, let url = redis.tlsURL {
            store = """
                {url: "\(url)", connectTimeout: 1s, commandTimeout: 250ms,
                       tls: {caFile: \(pki.caCertificate), certificate: \(pki.clientCertificate), privateKey: \(pki.clientKey)}}
                """
        } else if let password = options.redisPassword {
            let file = directory + "/redis.password"
            try (password + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            store = #"{url: "\#(redis.url)", password: {file: \#(file)}, connectTimeout: 250ms, commandTimeout: \#(options.commandTimeout)}"#
        } else {
            store = #"{url: "\#(redis.url)", connectTimeout: 250ms, commandTimeout: \#(options.commandTimeout)}"#
        }
        let upstream = try await TestUpstream()
        let deadPort = try ReservedPort()
        var apple: AppleMockServer?
        var fraudMetric = ""
        var deviceCheck = ""
        if options.receiptRefresh || options.deviceCheck {
            let pki = try await TestPKI.shared.value
            let keyPath = directory + "/AuthKey_\(deviceCheckKeyId).p8"
            let made = try await Run.tool(
                "openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath])
            guard made.status == 0 else { throw HarnessError("openssl genpkey: \(made.stderr)") }
            let publicKey = try await Run.tool("openssl", ["pkey", "-in", keyPath, "-pubout"])
            guard publicKey.status == 0 else { throw HarnessError("openssl pkey: \(publicKey.stderr)") }
            var mock = AppleMockOptions(certificatePath: pki.serverCertificate, privateKeyPath: pki.serverKey)
            // The refresher's JWTs are checked as Apple would.
            mock.jwtPublicKeyPEM = publicKey.stdout
            mock.receipts = .init(
                signer: receiptCA, anchors: try TrustAnchors(pemFiles: [caDir + "/receipt-root.cert.pem"]))
            mock.dropIdle = options.appleDropsKeptConnections
            let server = try await AppleMockServer(mock)
            apple = server
            if options.deviceCheck {
                deviceCheck = """
                    deviceCheck:
                      {teamId: \(teamId), keyId: \(deviceCheckKeyId), privateKey: {file: \(keyPath)},
                       baseURL: "\(server.baseURL)", developmentBaseURL: "\(server.baseURL)", caFile: \(pki.caCertificate), timeout: 400ms,
                       updateRetryFor: \(options.updateRetryFor)\(options.updatePollEvery.map { ", updatePollEvery: \($0)" } ?? "")\(options.updateBatch.map { ", updateBatch: \($0)" } ?? "")\(options.maxQueuedUpdates.map { ", maxQueuedUpdates: \($0)" } ?? "")}

                    """
            }
            if options.receiptRefresh { fraudMetric = """
                fraudMetric:
                  {teamId: \(teamId), keyId: \(deviceCheckKeyId), privateKey: {file: \(keyPath)},
                   baseURL: "\(server.baseURL)", developmentBaseURL: "\(server.baseURL)", caFile: \(pki.caCertificate), pollEvery: 50ms, refreshEvery: 1h}

                """
            }
        }
        let yaml = """
            listeners: [{address: 127.0.0.1:0}]
            admin: {address: 127.0.0.1:0, token: \(adminToken)}
            apps:
              - {appId: \(appId), environments: [development, production]\(options.appRules.map { ", rules: \($0)" } ?? "")}
              - {appId: \(productionOnlyAppId), environments: [production]}
            \(options.extraApps.map { "  - \($0)\n" }.joined())
            attestation:
              prefix: \(prefix)
              trustAnchors: [\(caDir)/root.cert.pem]
              receiptTrustAnchors: [\(caDir)/receipt-root.cert.pem]
              challengeRate: \(options.challengeRate)
            \(options.rampUp.map { "  rampUp: \($0)" } ?? "")
            store:
              redis: \(store)
            trust: {signingSecret: \(signingSecret)}
            upstreams:
              legacy: {endpoints: [http://127.0.0.1:\(upstream.port)], responseTimeout: 5s}
              slow: {endpoints: [http://127.0.0.1:\(upstream.port)], responseTimeout: 300ms}
              dead: {endpoints: [http://127.0.0.1:\(deadPort.port)], connectTimeout: 500ms}
            \(options.extraUpstreams.map { "  \($0)\n" }.joined())routes:
            \((options.extraRoutes + (options.deviceCheck ? Self.deviceCheckRoutes : [])).map { "  - \($0)\n" }.joined())  - {match: {prefix: /enforce/}, upstream: legacy, mode: enforce, maxBodyBytes: 1KiB}
              - {match: {prefix: /challenged/}, upstream: legacy, mode: enforce, challenge: required}
              - {match: {prefix: /unsigned/}, upstream: legacy, mode: enforce, bindBody: false}
              - {match: {prefix: /monitor/}, upstream: legacy, mode: monitor}
              - {match: {prefix: /monitor-challenged/}, upstream: legacy, mode: monitor, challenge: required}
              - {match: {prefix: /risky/}, upstream: legacy, mode: enforce, maxRiskMetric: 5}
              - {match: {prefix: /lenient/}, upstream: legacy, mode: enforce, onStoreError: forward}
              - {match: {prefix: /dead/}, upstream: dead, mode: passthrough}
              - {match: {prefix: /slow}, upstream: slow, mode: passthrough}
              - {match: {prefix: /open/}, upstream: legacy, mode: passthrough}
              - {match: {prefix: /monitor-capped/}, upstream: legacy, mode: monitor, maxBodyBytes: 1KiB}
              - {match: {prefix: /monitor-strict/}, upstream: legacy, mode: monitor, onStoreError: reject}
            logging: {level: critical, format: text}
            \(fraudMetric)
            \(deviceCheck)
            \(options.extraTopLevel)
            """
        let configPath = directory + "/assertgate.yaml"
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
        var logger = Logger(label: "assertgate.e2e")
        logger.logLevel = .critical
        if let lines = options.log {
            logger = Logger(label: "assertgate.e2e") { _ in RecordingLogHandler(lines: lines, level: .warning) }
        }
        let server: GatewayServer
        do {
            server = try await GatewayServer.start(configPath: configPath, workers: options.workers, logger: logger)
        } catch {
            // A config the gateway refuses must not leave the upstream's
            // listener, Redis and the mock behind for the rest of the run.
            try? await upstream.stop()
            try? await apple?.stop()
            redis.stop()
            cluster?.stop()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        let harness = EnforcementHarness(
            redis: redis, upstream: upstream, server: server, directory: directory, ca: ca, receiptCA: receiptCA,
            configPath: configPath, apple: apple, cluster: cluster, deadPort: deadPort)
        // Like a load balancer: no traffic before /readyz (every worker's Redis
        // connection up); polled, bounded by a deadline.
        let deadline = Date().addingTimeInterval(10)
        while try await harness.send("GET", "/readyz", http1: true, base: harness.adminBase).status != 200 {
            guard Date() < deadline else { throw HarnessError("/readyz did not answer 200 within 10 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
        return harness
    }

    private init(
        redis: RedisServerFixture, upstream: TestUpstream, server: GatewayServer, directory: String, ca: TestCA,
        receiptCA: ReceiptCA, configPath: String, apple: AppleMockServer?, cluster: RedisClusterFixture?,
        deadPort: ReservedPort
    ) {
        self.deadPort = deadPort
        self.apple = apple
        self.cluster = cluster
        self.redis = redis
        self.upstream = upstream
        self.server = server
        self.directory = directory
        self.ca = ca
        self.receiptCA = receiptCA
        self.configPath = configPath
    }

    /// Routes that ask DeviceCheck (with `Options.deviceCheck`).
    static let deviceCheckRoutes = [
        "{match: {prefix: /dc-bits/}, upstream: legacy, mode: enforce, bindBody: false, deviceCheck: query, rules: {require: {deviceBits: {bit1: false}}, flag: {deviceBits: {bit0: false}}}}",
        "{match: {prefix: /dc-device/}, upstream: legacy, mode: enforce, bindBody: false, deviceCheck: validate, fallback: device}",
        "{match: {prefix: /dc-watch/}, upstream: legacy, mode: monitor, bindBody: false, deviceCheck: query, fallback: device}",
        "{match: {prefix: /dc-lenient/}, upstream: legacy, mode: enforce, bindBody: false, deviceCheck: validate, fallback: device, onDeviceCheckError: forward}",
    ]

    /// The gateway stops (what it queued stays in Redis) and a new one starts
    /// on the same file and Redis, as after a crash and restart.
    func restartGateway() async throws {
        await server.shutdown(drain: .zero)
        var logger = Logger(label: "assertgate.e2e")
        logger.logLevel = .critical
        server = try await GatewayServer.start(configPath: configPath, workers: 2, logger: logger)
    }

    func stop() async throws {
        await server.shutdown(drain: .seconds(1))
        try await upstream.stop()
        try await apple?.stop()
        redis.stop()
        cluster?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: the app's side

    func newDevice() throws -> SimDevice { try SimDevice(ca: ca, receiptCA: receiptCA) }

    func challenge(for device: SimDevice, purpose: String) async throws -> String {
        let r = try await send(
            "POST", Self.prefix + "/challenge",
            body: #"{"keyId":"\#(device.keyIdBase64)","purpose":"\#(purpose)"}"#)
        guard r.status == 200, let c = r.json["challenge"] as? String else {
            throw HarnessError("challenge answered \(r.status): \(r.body)")
        }
        return c
    }

    /// The attest call of protocol.md §3, with an optional DeviceSim mutation.
    func attest(
        _ device: SimDevice, userId: String? = nil, appId: String = appId,
        environment: AttestationEnvironment = .development, mutation: AttestationMutation? = nil,
        challenge: String? = nil, options: AttestationOptions = AttestationOptions()
    ) async throws -> Response {
        let ch: String
        if let challenge {
            ch = challenge
        } else {
            ch = try await self.challenge(for: device, purpose: "attest")
        }
        let clientDataHash = DeviceSim.ClientData.hash(DeviceSim.ClientData.attestation(challenge: ch, userId: userId))
        let object = try device.attest(
            clientDataHash: clientDataHash, appId: appId, environment: environment,
            at: Int64(Date().timeIntervalSince1970), mutation: mutation, options: options)
        var fields = [
            #""keyId":"\#(device.keyIdBase64)""#, #""challenge":"\#(ch)""#,
            #""attestation":"\#(Verifier.Base64.encode(object))""#,
        ]
        if let userId { fields.append(#""userId":\#(JSONText.quoted(userId))"#) }
        return try await send("POST", Self.prefix + "/attest", body: "{" + fields.joined(separator: ",") + "}")
    }

    /// The three assertion headers for a request, signed by `device`.
    func assertionHeaders(
        _ device: SimDevice, method: String, path: String, body: [UInt8] = [], counter: UInt32,
        challenge: String? = nil, unsigned: Bool = false, appId: String = appId,
        mutation: AssertionMutation? = nil, extensions: DeviceSim.AuthenticatorExtensions? = nil
    ) throws -> [(String, String)] {
        let clientData = DeviceSim.ClientData.assertion(
            method: method, path: path, challenge: challenge, body: unsigned ? .unsigned : .body(body))
        let assertion = try device.assert(
            clientDataHash: DeviceSim.ClientData.hash(clientData), appId: appId, counter: counter, mutation: mutation,
            extensions: extensions)
        var headers = [
            ("AssertGate-Key-Id", device.keyIdBase64), ("AssertGate-Assertion", Verifier.Base64.encode(assertion)),
        ]
        if let challenge { headers.append(("AssertGate-Challenge", challenge)) }
        return headers
    }

    // MARK: HTTP through real clients

    struct Response {
        var status: Int
        /// Lower-cased names.
        var headers: [String: String]
        var body: String
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        }
        var reason: String? { json["reason"] as? String }
    }

    /// One request with curl (`--http2-prior-knowledge` unless `http1`), path sent as is.
    /// HEAD goes as curl's `--head`, which reads no body (with `-X HEAD` a
    /// Content-Length in the answer would make it wait for one).
    func send(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: String? = nil,
        http1: Bool = false, base: String? = nil, requestTarget: String? = nil
    ) async throws -> Response {
        let tag = UUID().uuidString
        let bodyOut = directory + "/\(tag).body"
        var args = ["-sS", "--path-as-is", "-D", "-", "-o", bodyOut] + (method == "HEAD" ? ["--head"] : ["-X", method])
        args.append(http1 ? "--http1.1" : "--http2-prior-knowledge")
        for (n, v) in headers { args += ["-H", "\(n): \(v)"] }
        if let requestTarget { args += ["--request-target", requestTarget] }
        if let body {
            let bodyIn = directory + "/\(tag).in"
            try body.write(toFile: bodyIn, atomically: true, encoding: .utf8)
            args += ["--data-binary", "@" + bodyIn, "-H", "Content-Type: application/json"]
        }
        args.append((base ?? self.base) + path)
        let r = try await Run.tool("curl", args, timeout: 20)
        guard r.status == 0 else { throw HarnessError("curl \(method) \(path) failed (\(r.status)): \(r.stderr)") }
        var status = 0
        var parsed: [String: String] = [:]
        for line in r.stdout.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }) {
            if line.hasPrefix("HTTP/") {
                status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
                parsed = [:]
            } else if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                parsed[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        let text = (try? String(contentsOfFile: bodyOut, encoding: .utf8)) ?? ""
        return Response(status: status, headers: parsed, body: text)
    }

    /// Rewrites the config file with `transform` and reloads it through the
    /// admin API (the SIGHUP path); throws unless the reload succeeded.
    func reload(_ transform: (String) -> String) async throws {
        let text = try String(contentsOfFile: configPath, encoding: .utf8)
        let changed = transform(text)
        guard changed != text else { throw HarnessError("reload: the transform changed nothing") }
        try changed.write(toFile: configPath, atomically: true, encoding: .utf8)
        let r = try await send(
            "POST", "/reload", headers: [("Authorization", "Bearer \(Self.adminToken)")], http1: true, base: adminBase)
        guard r.status == 200 else { throw HarnessError("reload answered \(r.status): \(r.body)") }
    }

    /// The last request head the upstream received, and how many it received.
    var lastUpstreamHead: HTTPRequestHead? { upstream.requests.last }
    var upstreamCount: Int { upstream.requests.count }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Checks `X-AssertGate-Signature` with Python's hmac module: an
/// implementation that shares nothing with the gateway's.
enum IndependentSignatureCheck {
    static func verify(_ head: HTTPRequestHead, secret: String, prefix: String = "x-assertgate-") async throws -> Bool {
        guard let signature = head.headers.first(name: prefix + "signature"),
            let requestId = head.headers.first(name: "x-request-id")
        else { return false }
        var trust: [[String]] = []
        for (name, value) in head.headers {
            let lower = name.lowercased()
            if lower.hasPrefix(prefix) && lower != prefix + "signature" { trust.append([lower, value]) }
        }
        let input: [String: Any] = [
            "sig": signature, "rid": requestId, "method": head.method.rawValue, "path": head.uri,
            "headers": trust, "secret": secret,
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: input), as: UTF8.self)
        let script = """
            import hmac, hashlib, json, sys
            d = json.loads(sys.argv[1])
            parts = dict(p.strip().split("=", 1) for p in d["sig"].split(","))
            msg = parts["t"] + "\\n" + d["rid"] + "\\n" + d["method"] + "\\n" + d["path"] + "\\n"
            for name, value in sorted(d["headers"]):
                msg += name + ":" + value + "\\n"
            mac = hmac.new(d["secret"].encode(), msg.encode(), hashlib.sha256).hexdigest()
            print("ok" if hmac.compare_digest(mac, parts["v1"]) else "bad")
            """
        let r = try await Run.tool("python3", ["-c", script, json])
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok"
    }
}
