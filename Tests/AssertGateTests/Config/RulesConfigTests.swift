import Testing
import Verifier

@testable import AssertGateCore

/// risk.md §2: `rules` on apps and routes, parsed and validated with lines.
@Suite struct RulesConfigTests {
    static func yaml(app: String = "", route: String = "", routeExtra: String = "", mode: String = "enforce") -> String {
        """
        listeners: [{address: 127.0.0.1:8080}]
        apps:
          - {appId: ABCDE12345.com.example.app, environments: [development, production]\(app.isEmpty ? "" : ", rules: \(app)")}
        store: {memory: {}}
        upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
        routes:
          - {match: {prefix: /api/}, upstream: api, mode: \(mode)\(route.isEmpty ? "" : ", rules: \(route)")\(routeExtra)}
        """
    }



    @Test func everyKeyParses() throws {
        let yaml = Self.yaml(
            app: "{require: {environments: [production], launchCategories: [app-store, testflight, 11, missing], "
                + "minAppVersion: 2.10, keyPolicy: macos-full-security}, flag: {maxUserKeys: 3, maxRiskMetric: 5}}",
            route: "{require: {deviceBits: {bit0: false, bit1: true}, maxRiskMetric: 20}}", routeExtra: ", deviceCheck: query")
            + "\ndeviceCheck: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {env: DC_KEY}}\n"
        let c = try ConfigLoader(environment: ["DC_KEY": "pem"]).load(yaml: yaml, filename: "config.yaml", baseDirectory: nil)
        let app = c.apps[0].rules
        #expect(app.require.environments == [.production])
        #expect(app.require.launchCategories == LaunchCategoryRule(allowed: [4, 2, 11], allowsMissing: true))
        // YAML would read 2.10 as a float; the text is kept.
        #expect(app.require.minAppVersion?.text == "2.10")
        #expect(app.require.keyPolicy == .macosFullSecurity)
        #expect(app.flag.maxUserKeys == 3)
        #expect(app.flag.maxRiskMetric == 5)
        let route = c.routes[0]
        #expect(route.rules.require.deviceBits == DeviceBitsRule(bit0: false, bit1: true))
        #expect(route.maxRiskMetric == 20)
    }

    @Test func theOldRouteKeyIsAnAliasAndBothAreAnError() throws {
        let c = try ConfigText.load(Self.yaml(routeExtra: ", maxRiskMetric: 7"))
        #expect(c.routes[0].rules.require.maxRiskMetric == 7)
        #expect(ConfigText.errors(Self.yaml(route: "{require: {maxRiskMetric: 3}}", routeExtra: ", maxRiskMetric: 7")) == [
            "config.yaml:7: routes[0].maxRiskMetric: also given as routes[0].rules.require.maxRiskMetric; keep one (they are the same rule)"
        ])
    }

    @Test func unknownKeysNamesAndValuesAreErrors() {
        #expect(ConfigText.errors(Self.yaml(app: "{require: {minVersion: 2}}")) == [
            "config.yaml:3: unknown key 'minVersion' in apps[0].rules.require; did you mean 'minAppVersion'?"
        ])
        #expect(ConfigText.errors(Self.yaml(app: "{deny: {}}")) == ["config.yaml:3: unknown key 'deny' in apps[0].rules"])
        let names = "invalid, platform, testflight, development, app-store, enterprise, developer-id, local-signing, rosetta, oop-jit, none"
        #expect(ConfigText.errors(Self.yaml(app: "{flag: {launchCategories: [appstore, -1]}}")) == [
            "config.yaml:3: apps[0].rules.flag.launchCategories[0]: 'appstore' is not a launch category (\(names), a number up to 4294967295, or missing)",
            "config.yaml:3: apps[0].rules.flag.launchCategories[1]: '-1' is not a launch category (\(names), a number up to 4294967295, or missing)",
        ])
        #expect(ConfigText.errors(Self.yaml(app: "{require: {keyPolicy: other}}")) == [
            "config.yaml:3: apps[0].rules.require.keyPolicy: expected macos-full-security (the only policy a rule can require), got 'other'"
        ])
        #expect(ConfigText.errors(Self.yaml(app: "{require: {maxUserKeys: 0, environments: [staging]}}")).sorted() == [
            "config.yaml:3: apps[0].rules.require.environments[0]: expected production or development, got 'staging'",
            "config.yaml:3: apps[0].rules.require.maxUserKeys: must be at least 1, got 0",
        ])
        #expect(ConfigText.errors(Self.yaml(app: "{require: {minAppVersion: \"2..3\"}}")) == [
            "config.yaml:3: apps[0].rules.require.minAppVersion: '2..3' is not a version (dot-separated, non-empty components, printable ASCII, at most 64 bytes)"
        ])
    }

    @Test func deviceBitsIsRouteLevelOnlyAndPassthroughTakesNoRules() {
        #expect(ConfigText.errors(Self.yaml(app: "{require: {deviceBits: {bit0: false}}}")) == [
            "config.yaml:3: apps[0].rules.require.deviceBits: deviceBits is a route-level rule only (bits exist only where a route queries them)"
        ])
        #expect(ConfigText.errors(Self.yaml(route: "{flag: {deviceBits: {}}}")) == [
            "config.yaml:7: routes[0].rules.flag.deviceBits: give bit0 and/or bit1 (true or false)"
        ])
        #expect(ConfigText.errors(Self.yaml(route: "{flag: {maxUserKeys: 2}}", mode: "passthrough")) == [
            "config.yaml:7: routes[0].rules: a passthrough route checks no assertion, so it takes no rules"
        ])
    }

    @Test func theOldRouteKeyOnAPassthroughRouteIsWarnedAbout() throws {
        let c = try ConfigText.load(Self.yaml(routeExtra: ", maxRiskMetric: 5", mode: "passthrough"))
        #expect(c.warnings.contains("routes[0].maxRiskMetric never acts: the route is passthrough (no assertion is checked)"))
        let enforced = try ConfigText.load(Self.yaml(routeExtra: ", maxRiskMetric: 5"))
        #expect(!enforced.warnings.contains { $0.contains("never acts: the route is passthrough") })
    }
}
