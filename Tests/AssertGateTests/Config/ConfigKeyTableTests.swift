import Foundation
import Testing
@testable import AssertGateCore

/// `ConfigSection` is what the parser accepts (so docs/config.md can be
/// checked against it): at every place a section occurs, each key in the
/// table is taken and a key outside it is refused as unknown.
@Suite struct ConfigKeyTableTests {
    static let base: [String: String] = [
        "listeners": "[{address: 127.0.0.1:8080}]",
        "apps": "[{appId: ABCDE12345.com.example.app}]",
        "store": "{memory: {}}",
        "upstreams": "{api: {endpoints: ['http://127.0.0.1:9001']}}",
        "routes": "[{match: {prefix: /}, upstream: api, mode: passthrough}]",
    ]

    /// A file with `KEY: 1` placed in the mapping at `path`, and the keys that
    /// mapping already holds there (a second one would be a YAML duplicate).
    static func file(path: String, key: String) -> (yaml: String, present: Set<String>)? {
        var top = base
        let entry = "\(key): 1"
        var present: Set<String> = []
        switch path {
        case "":
            if top[key] != nil { return nil }
            top[key] = "{}"
        case "listeners[]":
            top["listeners"] = "[{address: 127.0.0.1:8080, \(entry)}]"; present = ["address"]
        case "listeners[].tls": top["listeners"] = "[{address: 127.0.0.1:8080, tls: {\(entry)}}]"
        case "admin": top["admin"] = "{\(entry)}"
        case "<secret>": top["admin"] = "{token: {\(entry)}}"
        case "apps[]": top["apps"] = "[{appId: ABCDE12345.com.example.app, \(entry)}]"; present = ["appId"]
        case "attestation": top["attestation"] = "{\(entry)}"
        case "attestation.challengeRate": top["attestation"] = "{challengeRate: {\(entry)}}"
        case "attestation.rampUp": top["attestation"] = "{rampUp: {\(entry)}}"
        case "attestation.headers": top["attestation"] = "{headers: {\(entry)}}"
        case "limits.streamResetRate": top["limits"] = "{streamResetRate: {\(entry)}}"
        case "store": top["store"] = "{\(entry)}"
        case "store.memory": top["store"] = "{memory: {\(entry)}}"
        case "store.redis": top["store"] = "{redis: {\(entry)}}"
        case "store.redis.tls": top["store"] = "{redis: {url: 'rediss://127.0.0.1:6379/0', tls: {\(entry)}}}"
        case "trust": top["trust"] = "{\(entry)}"
        case "upstreams.<name>":
            top["upstreams"] = "{api: {endpoints: ['http://127.0.0.1:9001'], \(entry)}}"; present = ["endpoints"]
        case "upstreams.<name>.tls": top["upstreams"] = "{api: {endpoints: ['https://127.0.0.1:9001'], tls: {\(entry)}}}"
        case "routes[]":
            top["routes"] = "[{match: {prefix: /}, upstream: api, mode: passthrough, \(entry)}]"
            present = ["match", "upstream", "mode"]
        case "routes[].match": top["routes"] = "[{match: {\(entry)}, upstream: api, mode: passthrough}]"
        case "routes[].limits": top["routes"] = "[{match: {prefix: /}, upstream: api, mode: passthrough, limits: {\(entry)}}]"
        case "apps[].rules": top["apps"] = "[{appId: ABCDE12345.com.example.app, rules: {\(entry)}}]"
        case "routes[].rules":
            top["routes"] = "[{match: {prefix: /}, upstream: api, mode: enforce, rules: {\(entry)}}]"
        case "<rules>.require", "<rules>.flag":
            let block = path.hasSuffix("require") ? "require" : "flag"
            top["routes"] = "[{match: {prefix: /}, upstream: api, mode: enforce, rules: {\(block): {\(entry)}}}]"
        case "<rules>.require.deviceBits", "<rules>.flag.deviceBits":
            let block = path.contains("require") ? "require" : "flag"
            top["routes"] = "[{match: {prefix: /}, upstream: api, mode: enforce, rules: {\(block): {deviceBits: {\(entry)}}}}]"
        case "limits": top["limits"] = "{\(entry)}"
        case "fraudMetric": top["fraudMetric"] = "{\(entry)}"
        case "deviceCheck": top["deviceCheck"] = "{\(entry)}"
        case "logging": top["logging"] = "{\(entry)}"
        default:
            Issue.record("no test file for section path '\(path)': add one here")
            return nil
        }
        if present.contains(key) { return nil }
        let yaml = top.keys.sorted().map { "\($0): \(top[$0] ?? "")" }.joined(separator: "\n") + "\n"
        return (yaml, present)
    }

    static func unknownKeyErrors(_ yaml: String) -> [String] {
        do {
            _ = try ConfigLoader(environment: [:]).load(yaml: yaml, filename: "config.yaml")
            return []
        } catch {
            return error.diagnostics.map(\.description).filter { $0.contains("unknown key") }
        }
    }

    @Test(arguments: ConfigSection.allCases)
    func parserTakesExactlyTheTable(_ section: ConfigSection) {
        for path in section.paths {
            for key in section.keys {
                guard let (yaml, _) = Self.file(path: path, key: key) else { continue }
                let errors = Self.unknownKeyErrors(yaml)
                #expect(errors.isEmpty, "'\(key)' at '\(path)' was refused: \(errors)")
            }
            guard let (yaml, _) = Self.file(path: path, key: "notAKey") else { continue }
            let errors = Self.unknownKeyErrors(yaml)
            #expect(errors.contains { $0.contains("unknown key 'notAKey'") }, "'notAKey' at '\(path)' was taken: \(yaml)")
        }
    }

    /// No mapping of the parser bypasses the table with a key list of its own
    /// (`mapping(…, allowed: …)`), which would accept keys the table, and so
    /// the docs check, never sees.
    @Test func everyMappingIsReadThroughTheTable() throws {
        let directory = PackagePaths.root + "/Sources/AssertGateCore/Config"
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasSuffix(".swift") && $0 != "ConfigReader.swift" && $0 != "ConfigKeys.swift" }.sorted()
        #expect(files.contains("ConfigSectionParser.swift"))
        var calls = 0
        var offenders: [String] = []
        for file in files {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            for call in Self.mappingCalls(in: text) {
                calls += 1
                if call.contains("allowed:") { offenders.append("\(file): \(call)") }
            }
        }
        #expect(calls >= ConfigSection.allCases.count, "only \(calls) mapping calls found")
        #expect(offenders.isEmpty, "read these mappings with `section:` (ConfigKeys.swift): \(offenders)")
    }

    /// The argument lists of every `.mapping(…)` call, parentheses balanced.
    static func mappingCalls(in text: String) -> [String] {
        var out: [String] = []
        var rest = Substring(text)
        while let start = rest.range(of: ".mapping(") {
            var depth = 1
            var index = start.upperBound
            while index < rest.endIndex, depth > 0 {
                if rest[index] == "(" { depth += 1 } else if rest[index] == ")" { depth -= 1 }
                index = rest.index(after: index)
            }
            out.append(String(rest[start.upperBound..<index]))
            rest = rest[index...]
        }
        return out
    }
}
