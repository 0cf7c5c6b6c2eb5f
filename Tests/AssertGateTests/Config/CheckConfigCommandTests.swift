import Foundation
import Testing

/// Runs the built `assertgate` binary (next to the test bundle) as operators do.
@Suite struct CheckConfigCommandTests {
    static func binary() throws -> String {
        let path = PackagePaths.productsDirectory + "/assertgate"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            Issue.record("assertgate binary not found at \(path); build it with `swift build --product assertgate`")
            throw CancellationError()
        }
        return path
    }

    @Test func validFileExitsZeroAndPrintsResolvedRoutes() throws {
        let result = try Subprocess.run(try Self.binary(), ["check-config", PackagePaths.root + "/deploy/minimal.yaml"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("127.0.0.1:8080"))
        #expect(result.stdout.contains("[0] prefix /api/ methods any -> api  mode enforce"))
        #expect(result.stdout.contains("onStoreError reject"))
        #expect(result.stdout.contains("maxBodyBytes 1MiB"))
        #expect(result.stdout.contains("api: http://127.0.0.1:9001"))
        // risk.md §6.19: warnings (here: the memory store) go to stderr, one per line.
        #expect(result.stderr.split(separator: "\n") == [
            "warning: store is memory: keys and counters live in this process only and are lost on restart"
        ])
        #expect(!result.stdout.contains("warning:"))
    }

    @Test func printsEffectiveRulesPerRouteAndAppAndWarnsAboutRulesThatCannotAct() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = try dir.write("rules.yaml", """
            listeners: [{address: 127.0.0.1:8080}]
            apps:
              - appId: ABCDE12345.com.example.app
                environments: [production, development]
                rules:
                  require: {launchCategories: [app-store, 2, missing], minAppVersion: "2.10"}
                  flag: {maxUserKeys: 3, maxRiskMetric: 5}
              - {appId: ABCDE12345.com.example.mac, rules: {require: {keyPolicy: macos-full-security}}}
            store: {redis: {url: "redis://127.0.0.1:6379/0"}}
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes:
              - match: {prefix: /pay/}
                upstream: api
                mode: enforce
                rules: {require: {launchCategories: [app-store], deviceBits: {bit1: false}}, flag: {minAppVersion: "3"}}
                deviceCheck: query
              - {match: {prefix: /}, upstream: api, mode: monitor}
            deviceCheck: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {file: AuthKey.p8}}
            """)
        try dir.write("AuthKey.p8", try TestKeys.ecPrivateKeyPEM())
        let result = try Subprocess.run(try Self.binary(), ["check-config", path])
        #expect(result.status == 0, "\(result.stderr)")
        let out = result.stdout
        #expect(out.contains(
            "  [0] ABCDE12345.com.example.app: require environments [development, production] (always), "
                + "launchCategories [app-store], minAppVersion 2.10, deviceBits {bit1: false}; "
                + "flag minAppVersion 3, maxUserKeys 3, maxRiskMetric 5"), "\(out)")
        #expect(out.contains(
            "  [0] ABCDE12345.com.example.mac: require environments [production] (always), launchCategories [app-store], "
                + "keyPolicy macos-full-security, deviceBits {bit1: false}; flag minAppVersion 3"), "\(out)")
        #expect(out.contains(
            "  [1] ABCDE12345.com.example.app: require environments [development, production] (always), "
                + "launchCategories [testflight, app-store, missing], minAppVersion 2.10; flag maxUserKeys 3, maxRiskMetric 5"),
            "\(out)")
        #expect(out.contains(
            "  [1] ABCDE12345.com.example.mac: require environments [production] (always), keyPolicy macos-full-security"),
            "\(out)")
        #expect(result.stderr.split(separator: "\n").map(String.init) == [
            "warning: apps[0].rules.flag.maxRiskMetric has no effect without fraudMetric: keys get a risk metric only from refreshed receipts",
        ])
    }

    @Test func invalidFileExitsOneWithFileLineErrors() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = try dir.write("bad.yaml", """
            listeners: [{address: 127.0.0.1:8080}]
            apps: [{appId: ABCDE12345.com.example.app}]
            upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
            routes:
              - {match: {prefix: /}, upstream: api, mdoe: enforce}
            """)
        let result = try Subprocess.run(try Self.binary(), ["check-config", path])
        #expect(result.status == 1)
        #expect(result.stderr.split(separator: "\n") == [
            "\(path):5: unknown key 'mdoe' in routes[0]; did you mean 'mode'?",
            "\(path):5: missing required key 'mode' in routes[0]",
        ])
        #expect(result.stdout.isEmpty)
    }

    @Test func filesThatDoNotLoadExitOneNamingTheSetting() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        // Right labels, wrong contents: the loader accepts them, loading them does not.
        let (cert, key) = try dir.writeCertAndKey()
        try dir.write("AuthKey.p8", "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n")
        try dir.write("upstream-ca.pem", "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
        let path = try dir.write("files.yaml", """
            listeners: [{address: 127.0.0.1:8443, tls: {certificate: \(cert), privateKey: \(key)}}]
            apps: [{appId: ABCDE12345.com.example.app}]
            store: {memory: {}}
            upstreams:
              api: {endpoints: [http://127.0.0.1:9001]}
              secure: {endpoints: [https://127.0.0.1:9443], tls: {caFile: upstream-ca.pem}}
            routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]
            fraudMetric: {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {file: AuthKey.p8}}
            """)
        let result = try Subprocess.run(try Self.binary(), ["check-config", path])
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first?.hasPrefix("\(path): listeners[0].tls: TLS: cannot load certificate chain '\(cert)'") == true, "\(lines)")
        #expect(lines.dropFirst().first?.hasPrefix("\(path): upstreams.secure.tls: ") == true, "\(lines)")
        #expect(lines.last?.hasPrefix("\(path): fraudMetric.privateKey: not a PEM private key") == true, "\(lines)")
        #expect(result.stdout.isEmpty)
    }

    @Test func missingFileExitsOne() throws {
        let result = try Subprocess.run(try Self.binary(), ["check-config", "/nonexistent/assertgate.yaml"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("/nonexistent/assertgate.yaml: cannot read"))
    }

    @Test func usageErrorsExitTwo() throws {
        let bin = try Self.binary()
        let missing = try Subprocess.run(bin, ["check-config"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("Missing expected argument"))
        #expect(try Subprocess.run(bin, ["check-config", "a", "b"]).status == 2)
        #expect(try Subprocess.run(bin, ["no-such-command"]).status == 2)
        #expect(try Subprocess.run(bin, ["check-config", "--bogus-flag", "x"]).status == 2)
    }

    @Test func helpExitsZero() throws {
        let result = try Subprocess.run(try Self.binary(), ["check-config", "--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("check-config"))
    }

    /// docs/cli.md: every executable the package builds takes `--help`, prints
    /// its usage and exits 0; an unknown option is a usage error (2).
    @Test(arguments: ["assertgate", "assertgate-device", "verifier-bench", "store-bench", "rules-bench"])
    func everyExecutableTakesHelp(_ name: String) throws {
        let path = PackagePaths.productsDirectory + "/" + name
        try #require(FileManager.default.isExecutableFile(atPath: path), "\(name) is not built at \(path)")
        let help = try Subprocess.run(path, ["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.lowercased().contains("usage"))
        let unknown = try Subprocess.run(path, ["--no-such-option"])
        #expect(unknown.status == 2)
        #expect(!unknown.stderr.isEmpty)
    }
}
