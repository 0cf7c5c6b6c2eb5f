import NIOCore
import Testing
@testable import AssertGateCore

/// `deviceCheck:` (config.md): defaults, the fallback to fraudMetric's key,
/// and errors that say what to fix.
@Suite struct DeviceCheckConfigTests {
    private static let base = """
        listeners: [{address: 127.0.0.1:8080}]
        apps: [{appId: ABCDE12345.com.example.app}]
        upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
        routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]

        """

    private func parse(_ extra: String) -> Result<GatewayConfig, ConfigError> {
        do {
            return .success(try ConfigLoader(environment: ["DC_KEY": "pem"]).load(yaml: Self.base + extra, filename: "c.yaml"))
        } catch {
            return .failure(error)
        }
    }

    private func errors(_ extra: String) -> [String] {
        guard case .failure(let e) = parse(extra) else { return [] }
        return e.diagnostics.map(\.description)
    }

    @Test func defaultsAndExplicitValues() throws {
        let c = try parse("deviceCheck: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}}\n").get()
        let d = try #require(c.deviceCheck)
        #expect(d.baseURL == "https://api.devicecheck.apple.com")
        #expect(d.developmentBaseURL == "https://api.development.devicecheck.apple.com")
        #expect(d.environment == .production)
        #expect(d.timeout == .seconds(2))
        #expect(d.updateRetryFor == .hours(1))
        #expect(d.updatePollEvery == .milliseconds(250))
        #expect(d.updateBatch == 32)
        #expect(d.maxQueuedUpdates == 20_000)
        #expect(d.caFile == nil)
        let e = try parse("""
            deviceCheck:
              {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}, baseURL: "https://127.0.0.1:8443/",
               developmentBaseURL: "https://[::1]:9443", environment: development, timeout: 300ms, updateRetryFor: 10m,
               updatePollEvery: 1s, updateBatch: 100, maxQueuedUpdates: 500}

            """).get().deviceCheck
        #expect(e?.baseURL == "https://127.0.0.1:8443")
        #expect(e?.developmentBaseURL == "https://[::1]:9443")
        #expect(e?.environment == .development)
        #expect(e?.timeout == .milliseconds(300))
        #expect(e?.updateRetryFor == .minutes(10))
        #expect(e?.updatePollEvery == .seconds(1))
        #expect(e?.updateBatch == 100)
        #expect(e?.maxQueuedUpdates == 500)
        #expect(try parse("").get().deviceCheck == nil)
    }

    /// `onDeviceCheckError` set where nothing consults it is warned about.
    @Test func anOnDeviceCheckErrorThatNeverActsIsWarnedAbout() throws {
        let yaml = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            deviceCheck: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}}
            routes:
              - {match: {prefix: /a}, upstream: api, mode: monitor, deviceCheck: validate, onDeviceCheckError: reject}
              - {match: {prefix: /b}, upstream: api, mode: monitor, deviceCheck: validate, fallback: device, onDeviceCheckError: reject}
              - {match: {prefix: /c}, upstream: api, mode: monitor, deviceCheck: query, onDeviceCheckError: reject, rules: {require: {deviceBits: {bit0: false}}}}
              - {match: {prefix: /d}, upstream: api, mode: enforce, deviceCheck: validate, onDeviceCheckError: reject}

            """
        let c = try ConfigLoader(environment: ["DC_KEY": "pem"]).load(yaml: yaml, filename: "c.yaml")
        let about = c.warnings.filter { $0.contains("onDeviceCheckError") }
        #expect(about == [
            "routes[0].onDeviceCheckError: reject never acts: the route has neither fallback: device nor rules.require.deviceBits, so Apple not answering only leaves the device signal unavailable"
        ])
    }

    @Test func theAppleKeyDefaultsToFraudMetrics() throws {
        let c = try parse("""
            fraudMetric: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}}
            deviceCheck: {timeout: 1s}

            """).get()
        #expect(c.deviceCheck?.teamId == "ABCDE12345")
        #expect(c.deviceCheck?.keyId == "XYZ1234567")
        #expect(c.deviceCheck?.privateKey.source == .env("DC_KEY"))
        let own = try parse("""
            fraudMetric: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}}
            deviceCheck: {keyId: KEY9876543}

            """).get()
        #expect(own.deviceCheck?.keyId == "KEY9876543")
        #expect(own.deviceCheck?.teamId == "ABCDE12345")
    }

    @Test func errorsNameTheKeyAndTheFix() {
        let missing = errors("deviceCheck: {}\n")
        #expect(missing.contains { $0.contains("deviceCheck.teamId: required (or set fraudMetric.teamId") }, "\(missing)")
        #expect(missing.contains { $0.contains("deviceCheck.keyId: required") }, "\(missing)")
        #expect(missing.contains { $0.contains("deviceCheck.privateKey: required") }, "\(missing)")
        let bad = errors("""
            deviceCheck:
              {teamId: abc, keyId: XYZ1234567, privateKey: {env: DC_KEY}, baseURL: "http://x", environment: staging,
               timeout: 31s, updateRetryFor: 10ms, updatePollEvery: 5ms, updateBatch: 0, maxQueuedUpdates: 0, colour: blue}

            """)
        for expected in [
            "deviceCheck.teamId: 'abc' must be 10 characters of A-Z and 0-9",
            "deviceCheck.baseURL:",
            "deviceCheck.environment:",
            "deviceCheck.timeout: at most 30s (requests wait on it), got 31s",
            "deviceCheck.updateRetryFor: must be at least 1s",
            "deviceCheck.updatePollEvery: between 10ms and 1m, got 5ms",
            "deviceCheck.updateBatch: must be at least 1, got 0",
            "deviceCheck.maxQueuedUpdates: must be at least 1, got 0",
            "colour",
        ] {
            #expect(bad.contains { $0.contains(expected) }, "\(expected) not in \(bad)")
        }
    }

    // MARK: routes (risk.md §3, §6.10)

    private static let section = "deviceCheck: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}}\n"

    private func routes(_ route: String, section: Bool = true) -> Result<GatewayConfig, ConfigError> {
        let yaml = """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes: [\(route)]

            """ + (section ? Self.section : "")
        do {
            return .success(try ConfigLoader(environment: ["DC_KEY": "pem"]).load(yaml: yaml, filename: "c.yaml"))
        } catch {
            return .failure(error)
        }
    }

    private func routeErrors(_ route: String, section: Bool = true) -> [String] {
        guard case .failure(let e) = routes(route, section: section) else { return [] }
        return e.diagnostics.map(\.description)
    }

    @Test func routeKeysParseWithTheirDefaults() throws {
        let c = try routes(
            "{match: {prefix: /a}, upstream: api, mode: enforce, deviceCheck: query, fallback: device}, "
                + "{match: {prefix: /b}, upstream: api, mode: monitor, deviceCheck: validate, onDeviceCheckError: reject}, "
                + "{match: {prefix: /}, upstream: api, mode: passthrough, deviceCheck: none}"
        ).get()
        #expect(c.routes[0].deviceCheck == .query)
        #expect(c.routes[0].fallback == .device)
        #expect(c.routes[0].onDeviceCheckError == .reject)  // enforce's default
        #expect(c.routes[1].deviceCheck == .validate)
        #expect(c.routes[1].onDeviceCheckError == .reject)  // set, against monitor's default
        #expect(c.routes[2].deviceCheck == DeviceCheckMode.none)
        #expect(c.attestation.headers.deviceToken == "AssertGate-Device-Token")
    }

    @Test func routeKeysThatCannotActAreErrors() {
        let cases: [(String, String)] = [
            ("{match: {prefix: /}, upstream: api, mode: passthrough, deviceCheck: query}", "a passthrough route takes no deviceCheck"),
            ("{match: {prefix: /}, upstream: api, mode: passthrough, fallback: device}", "a passthrough route takes no fallback"),
            ("{match: {prefix: /}, upstream: api, mode: enforce, fallback: device}", "fallback: device needs deviceCheck"),
            ("{match: {prefix: /}, upstream: api, mode: enforce, onDeviceCheckError: forward}", "the route has no deviceCheck"),
            (
                "{match: {prefix: /}, upstream: api, mode: enforce, deviceCheck: validate, rules: {flag: {deviceBits: {bit0: true}}}}",
                "deviceBits: needs deviceCheck: query"
            ),
            ("{match: {prefix: /}, upstream: api, mode: enforce, deviceCheck: maybe}", "expected one of none, validate, query"),
        ]
        for (route, message) in cases {
            let errors = routeErrors(route)
            #expect(errors.contains { $0.contains(message) }, "\(route): \(errors)")
        }
        let missing = routeErrors("{match: {prefix: /}, upstream: api, mode: enforce, deviceCheck: query}", section: false)
        #expect(missing.contains { $0.contains("routes[0].deviceCheck: needs the top-level deviceCheck: section") }, "\(missing)")
    }
}
