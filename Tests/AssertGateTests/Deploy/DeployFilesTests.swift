import AssertGateCore
import AssertGateRedis
import Foundation
import Testing
import Yams

/// No container engine runs here, so the container files cannot be started.
/// What can drift between them is checked instead: the config the compose
/// file mounts must load with the environment compose gives it, and its
/// ports, Redis host and path must be the ones compose and the Containerfile use.
@Suite struct DeployFilesTests {
    static let deploy = PackagePaths.root + "/deploy"

    /// `services.assertgate` of compose.yaml, and the names of every service.
    struct ComposeService {
        var ports: [String]
        var environment: [String: String]
        var volumes: [String]
        var serviceNames: Set<String>
    }

    static func compose() throws -> ComposeService {
        let text = try String(contentsOfFile: deploy + "/compose.yaml", encoding: .utf8)
        let root = try #require(try Yams.load(yaml: text) as? [String: Any])
        let services = try #require(root["services"] as? [String: Any])
        let gateway = try #require(services["assertgate"] as? [String: Any])
        // Compose allows several spellings; each is read into one form, so a
        // change of spelling cannot pass for a missing port or variable.
        var environment: [String: String] = [:]
        if let map = gateway["environment"] as? [String: Any] {
            for (name, value) in map { environment[name] = "\(value)" }
        } else if let list = gateway["environment"] as? [Any] {
            for item in list.map({ "\($0)" }) {
                let parts = item.split(separator: "=", maxSplits: 1)
                environment[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
            }
        }
        let ports = (gateway["ports"] as? [Any] ?? []).map { item -> String in
            if let long = item as? [String: Any] {  // {target: 8080, published: 8080, host_ip: ...}
                let host = long["host_ip"].map { "\($0):" } ?? ""
                return host + "\(long["published"] ?? ""):\(long["target"] ?? "")"
            }
            return "\(item)"
        }
        return ComposeService(
            ports: ports,
            environment: environment,
            volumes: (gateway["volumes"] as? [Any] ?? []).map { "\($0)" },
            serviceNames: Set(services.keys))
    }

    /// The container side of a port mapping ("8080", "8080:8080", "127.0.0.1:9901:9901/tcp").
    static func containerPort(_ mapping: String) -> Int? {
        let bare = mapping.split(separator: "/").first.map(String.init) ?? mapping
        return bare.split(separator: ":").last.flatMap { Int($0) }
    }

    static let configPath = deploy + "/compose-config/assertgate.yaml"

    /// The config as the container sees it: every variable compose sets, with a value.
    static func loadConfig(_ compose: ComposeService) throws -> GatewayConfig {
        var environment: [String: String] = [:]
        for name in compose.environment.keys { environment[name] = "a-value-long-enough-for-any-secret-check" }
        return try ConfigLoader(environment: environment).load(path: configPath)
    }

    @Test func theMountedConfigLoadsWithTheEnvironmentComposeGives() throws {
        let compose = try Self.compose()
        let config = try Self.loadConfig(compose)
        // Every {env: NAME} the file reads is one compose sets (else serve refuses to start).
        let text = try String(contentsOfFile: Self.configPath, encoding: .utf8)
        let regex = try NSRegularExpression(pattern: #"\{env: *([A-Za-z_][A-Za-z0-9_]*)\}"#)
        let names = regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
        #expect(!names.isEmpty)
        for name in names { #expect(compose.environment[name] != nil, "compose.yaml does not set \(name)") }
        // Compose must not start the gateway with an empty secret: `${NAME:?message}`.
        for name in names {
            let value = compose.environment[name] ?? ""
            #expect(value.hasPrefix("${\(name):?"), "\(name): \(value)")
        }
        // The admin listener is on 0.0.0.0 inside the container; that is the only warning.
        #expect(config.warnings == [
            "admin.address 0.0.0.0:9901 is not loopback: /metrics and /readyz are exposed without a token"
        ])
        #expect(config.admin.token != nil && config.trust.signingSecret != nil)
    }

    @Test func redisIsTheComposeServiceAndEveryPortIsPublished() throws {
        let compose = try Self.compose()
        let config = try Self.loadConfig(compose)
        guard case .redis(let redis) = config.store else {
            Issue.record("the compose config does not use Redis")
            return
        }
        let url = try RedisURL(parsing: redis.url)
        #expect(compose.serviceNames.contains(url.host), "store host \(url.host) is not a compose service")

        let published = Set(compose.ports.compactMap(Self.containerPort))
        let containerfile = try String(contentsOfFile: Self.deploy + "/Containerfile", encoding: .utf8)
        let exposed = Set(containerfile.split(separator: "\n").filter { $0.hasPrefix("EXPOSE ") }
            .flatMap { $0.split(separator: " ").dropFirst().compactMap { Int($0) } })
        for port in config.listeners.map(\.address.port) + [config.admin.address.port] {
            #expect(published.contains(port), "port \(port) is not published by compose.yaml")
            #expect(exposed.contains(port), "port \(port) is not EXPOSEd by the Containerfile")
        }
        // The admin API must not reach beyond the host: every mapping of its port is on loopback.
        let adminMappings = compose.ports.filter { Self.containerPort($0) == config.admin.address.port }
        #expect(!adminMappings.isEmpty)
        for mapping in adminMappings { #expect(mapping.hasPrefix("127.0.0.1:"), "\(mapping)") }
    }

    @Test func theImageReadsTheConfigComposeMounts() throws {
        let compose = try Self.compose()
        let containerfile = try String(contentsOfFile: Self.deploy + "/Containerfile", encoding: .utf8)
        let cmd = try #require(containerfile.split(separator: "\n").first { $0.hasPrefix("CMD ") })
        let mount = try #require(compose.volumes.first { $0.hasPrefix("./compose-config:") })
        let parts = mount.split(separator: ":")
        try #require(parts.count >= 2, "\(mount)")
        let target = String(parts[1])
        #expect(cmd.contains("\"\(target)/assertgate.yaml\""), "\(cmd) vs mount \(target)")
        // SwiftPM loads every target's directory, the test targets' too, before it
        // builds any product: the build stage needs each top-level one a target uses.
        let copied = Set(containerfile.split(separator: "\n").filter { $0.hasPrefix("COPY ") && !$0.contains("--from") }
            .compactMap { $0.split(separator: " ").dropFirst().first.map(String.init) })
        #expect(copied.isSuperset(of: ["Package.swift", "Sources", "Tests"]), "\(copied)")
        // The mounted directory is the one holding the config (paths relative to deploy/).
        #expect(FileManager.default.fileExists(atPath: Self.deploy + "/compose-config/assertgate.yaml"))
    }

    /// The systemd unit, linted by systemd itself (`systemd-analyze verify`
    /// prints every directive it cannot parse), with the binary path pointed at
    /// the one just built; and the config path it uses is the one the example
    /// config tells operators to install.
    @Test func theSystemdUnitVerifiesAndNamesTheInstalledConfig() throws {
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else {
            Issue.record("\(analyze) not found: install systemd (.ci/run does)")
            return
        }
        let unit = try String(contentsOfFile: Self.deploy + "/assertgate.service", encoding: .utf8)
        let dir = try TempDir()
        defer { dir.remove() }
        let local = unit.replacingOccurrences(of: "/usr/local/bin/assertgate", with: try CheckConfigCommandTests.binary())
        let path = try dir.write("assertgate.service", local)
        let result = try Subprocess.run(analyze, ["verify", path])
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty, "\(result.stdout)\(result.stderr)")

        let lines = unit.split(separator: "\n")
        let start = try #require(lines.first { $0.hasPrefix("ExecStart=") })
        let check = try #require(lines.first { $0.hasPrefix("ExecStartPre=") })
        let config = try #require(start.split(separator: " ").last.map(String.init))
        #expect(check.hasSuffix(" check-config " + config))
        #expect(lines.contains("ExecReload=/bin/kill -HUP $MAINPID"))
        let production = try String(contentsOfFile: Self.deploy + "/production.yaml", encoding: .utf8)
        #expect(production.contains("Install as \(config);"), "production.yaml names another install path than \(config)")
    }
}
