import Foundation
import NIOCore
import Yams

/// Loads the YAML of docs/config.md into a validated `GatewayConfig`. Every error names the
/// key path and the line; all errors found are reported together. Relative file
/// paths (TLS, trust anchors, `{file: …}` secrets) are resolved against the
/// config file's directory.
public struct ConfigLoader: Sendable {
    /// Variables `{env: NAME}` secrets are looked up in.
    public var environment: [String: String]
    public static let maxFileBytes = 1 << 20
    static let maxSecretBytes = 64 << 10
    /// Bounds alias expansion ("billion laughs") while walking the tree.
    static let maxNodes = 100_000

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    public static func load(path: String) throws(ConfigError) -> GatewayConfig {
        try ConfigLoader().load(path: path)
    }

    public static func load(yaml: String, filename: String) throws(ConfigError) -> GatewayConfig {
        try ConfigLoader().load(yaml: yaml, filename: filename)
    }

    public func load(path: String) throws(ConfigError) -> GatewayConfig {
        switch ConfigFiles.read(path, limit: Self.maxFileBytes) {
        case .failure(let e):
            throw ConfigError(diagnostics: [ConfigDiagnostic(file: path, line: nil, message: e.message)])
        case .success(let bytes):
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw ConfigError(diagnostics: [ConfigDiagnostic(file: path, line: nil, message: "not UTF-8 text")])
            }
            return try load(yaml: text, filename: path)
        }
    }

    /// - Parameter baseDirectory: where relative paths point; defaults to the
    ///   directory part of `filename`, else the working directory.
    public func load(yaml: String, filename: String, baseDirectory: String? = nil) throws(ConfigError) -> GatewayConfig {
        let base = baseDirectory ?? filename.lastIndex(of: "/").map { String(filename[..<$0]) }.map { $0.isEmpty ? "/" : $0 }
        let reader = ConfigReader(filename: filename)
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigError(diagnostics: [Self.diagnostic(for: error, filename: filename)])
        } catch {
            throw ConfigError(diagnostics: [ConfigDiagnostic(file: filename, line: nil, message: "\(error)")])
        }
        guard let root, !root.isNull else {
            throw ConfigError(diagnostics: [ConfigDiagnostic(file: filename, line: nil, message: "the file is empty")])
        }
        var budget = Self.maxNodes
        guard Self.countNodes(root, budget: &budget) else {
            throw ConfigError(diagnostics: [ConfigDiagnostic(
                file: filename, line: nil, message: "more than \(Self.maxNodes) YAML nodes (alias expansion?)")])
        }
        let parser = ConfigSectionParser(reader: reader, environment: environment, baseDirectory: base)
        let config = parser.parse(root)
        let diagnostics = reader.diagnostics.enumerated().sorted {
            ($0.element.line ?? 0, $0.offset) < ($1.element.line ?? 0, $1.offset)
        }.map(\.element)
        guard diagnostics.isEmpty, let config else {
            if diagnostics.isEmpty {
                throw ConfigError(diagnostics: [ConfigDiagnostic(file: filename, line: nil, message: "invalid configuration")])
            }
            throw ConfigError(diagnostics: diagnostics)
        }
        return config
    }

    private static func countNodes(_ node: Node, budget: inout Int) -> Bool {
        budget -= 1
        if budget < 0 { return false }
        switch node {
        case .mapping(let m):
            for (k, v) in m {
                guard countNodes(k, budget: &budget), countNodes(v, budget: &budget) else { return false }
            }
        case .sequence(let s):
            for v in s {
                guard countNodes(v, budget: &budget) else { return false }
            }
        case .scalar, .alias:
            break
        }
        return true
    }

    static func diagnostic(for error: YamlError, filename: String) -> ConfigDiagnostic {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let ctx = context.map { "\($0.text) " } ?? ""
            return ConfigDiagnostic(file: filename, line: mark.line, message: "YAML syntax error: \(ctx)\(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return ConfigDiagnostic(
                file: filename, line: context.mark.line,
                message: "duplicate key \(duplicates.map { "'\($0)'" }.joined(separator: ", ")) in a mapping")
        case .reader(let problem, _, _, _):
            return ConfigDiagnostic(file: filename, line: nil, message: "YAML read error: \(problem)")
        default:
            return ConfigDiagnostic(file: filename, line: nil, message: "YAML error: \(error)")
        }
    }
}
