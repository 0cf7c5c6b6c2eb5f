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
        #expect(d.caFile == nil)
        let e = try parse("""
            deviceCheck:
              {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}, baseURL: "https://127.0.0.1:8443/",
               developmentBaseURL: "https://[::1]:9443", environment: development, timeout: 300ms, updateRetryFor: 10m}

            """).get().deviceCheck
        #expect(e?.baseURL == "https://127.0.0.1:8443")
        #expect(e?.developmentBaseURL == "https://[::1]:9443")
        #expect(e?.environment == .development)
        #expect(e?.timeout == .milliseconds(300))
        #expect(e?.updateRetryFor == .minutes(10))
        #expect(try parse("").get().deviceCheck == nil)
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
               timeout: 31s, updateRetryFor: 10ms, colour: blue}

            """)
        for expected in [
            "deviceCheck.teamId: 'abc' must be 10 characters of A-Z and 0-9",
            "deviceCheck.baseURL:",
            "deviceCheck.environment:",
            "deviceCheck.timeout: at most 30s (requests wait on it), got 31s",
            "deviceCheck.updateRetryFor: must be at least 1s",
            "colour",
        ] {
            #expect(bad.contains { $0.contains(expected) }, "\(expected) not in \(bad)")
        }
    }
}
