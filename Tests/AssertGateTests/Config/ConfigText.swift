@testable import AssertGateCore

/// A configuration file's text loaded as `assertgate` loads a file, for the
/// config suites: no environment unless given, relative paths against `base`.
enum ConfigText {
    static func load(_ yaml: String, env: [String: String] = [:], base: String? = nil) throws -> GatewayConfig {
        try ConfigLoader(environment: env).load(yaml: yaml, filename: "config.yaml", baseDirectory: base)
    }

    /// The error lines, each with its file and line (empty when the text is valid).
    static func errors(_ yaml: String, env: [String: String] = [:], base: String? = nil) -> [String] {
        do {
            _ = try ConfigLoader(environment: env).load(yaml: yaml, filename: "config.yaml", baseDirectory: base)
            return []
        } catch {
            return error.diagnostics.map(\.description)
        }
    }
}
