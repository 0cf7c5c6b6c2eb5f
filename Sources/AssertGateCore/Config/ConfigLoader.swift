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
    /// Bounds alias expansion ("billion laughs"), counted by `YAMLExpansion`
    /// before the file is composed.
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
        guard YAMLExpansion.fits(yaml, limit: Self.maxNodes) else {
            throw ConfigError(diagnostics: [ConfigDiagnostic(
                file: filename, line: nil, message: "more than \(Self.maxNodes) YAML nodes (alias expansion?)")])
        }
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

    static func diagnostic(for error: YamlError, filename: String) -> ConfigDiagnostic {
        switch error {
        case .scanner(let context, let problem, let mark, let yaml), .parser(let context, let problem, let mark, let yaml),
            .composer(let context, let problem, let mark, let yaml):
            let ctx = context.map { "\($0.text): " } ?? ""
            let found = character(in: yaml, line: mark.line, column: mark.column).map { " (the character there is \($0))" } ?? ""
            return ConfigDiagnostic(
                file: filename, line: mark.line, column: mark.column, message: "YAML syntax error: \(ctx)\(problem)\(found)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            // Yams marks the first occurrence; the line to fix is the repeat.
            let names = duplicates.map { "'\($0)'" }.joined(separator: ", ")
            let first = context.mark.line
            if duplicates.count == 1,
                let again = repeatedKeyLine(duplicates[0], in: context.text, first: context.mark)
            {
                return ConfigDiagnostic(
                    file: filename, line: again, message: "duplicate key \(names) (first at line \(first))")
            }
            return ConfigDiagnostic(
                file: filename, line: first, message: "duplicate key \(names) in a mapping (first at line \(first))")
        case .reader(let problem, _, _, _):
            return ConfigDiagnostic(file: filename, line: nil, message: "YAML read error: \(problem)")
        default:
            return ConfigDiagnostic(file: filename, line: nil, message: "YAML error: \(error)")
        }
    }

    /// Names the character a YAML error points at, when it is one a reader
    /// cannot see or would not suspect: a tab (the usual culprit), another
    /// control character, or any other character quoted as it is.
    static func character(in yaml: String, line: Int, column: Int) -> String? {
        guard line >= 1, column >= 1 else { return nil }
        let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false)
        guard line <= lines.count else { return nil }
        let scalars = Array(lines[line - 1].unicodeScalars)
        guard column <= scalars.count else { return nil }
        let c = scalars[column - 1]
        switch c {
        case "\t": return "a tab: YAML indents with spaces only, replace it with spaces"
        case "\r": return "a carriage return"
        case " ": return nil
        default:
            if c.value < 0x20 || c.value == 0x7F || (0x80...0x9F).contains(c.value) || c.value == 0xFEFF {
                return "the invisible character U+\(String(c.value, radix: 16, uppercase: true))"
            }
            return "'\(Character(c))'"
        }
    }

    /// The line of the second occurrence of `key` in the mapping whose first
    /// key starts at `first`: the next line indented to the same column that
    /// starts with the key (a block mapping), or the next `key:` after a `{` or
    /// `,` (a flow mapping). nil when not found (the caller reports `first`).
    static func repeatedKeyLine(_ key: String, in yaml: String, first: Mark) -> Int? {
        let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.unicodeScalars) }
        // Yams gives (0, 0) for a key without a mark.
        guard first.line >= 1, first.line <= lines.count, first.column >= 1 else { return nil }
        let spellings = [key, "\"\(key)\"", "'\(key)'"].map { Array($0.unicodeScalars) }
        func keyAt(_ text: [Unicode.Scalar], _ start: Int) -> Bool {
            for s in spellings where start + s.count <= text.count && Array(text[start..<(start + s.count)]) == s {
                var i = start + s.count
                while i < text.count, text[i] == " " { i += 1 }
                if i < text.count, text[i] == ":" { return true }
            }
            return false
        }
        let indent = first.column - 1
        let firstLine = lines[first.line - 1]
        // In a flow mapping when a '{' or ',' comes before the key on its line,
        // or ends the line before (a flow mapping continued on the next line).
        let before = firstLine[..<min(indent, firstLine.count)]
        let previous = lines[..<(first.line - 1)].last { line in line.contains { $0 != " " } }
        let flow =
            before.contains { $0 == "{" || $0 == "," }
            || (before.allSatisfy { $0 == " " } && (previous?.last { $0 != " " }).map { $0 == "," || $0 == "{" } == true)
        if flow {
            // Flow mapping: the next "{ key:" or ", key:" after the first one.
            var (l, c) = (first.line - 1, indent + 1)
            while l < lines.count {
                let text = lines[l]
                while c < text.count {
                    if text[c] == "," || text[c] == "{" {
                        var k = c + 1
                        while k < text.count, text[k] == " " { k += 1 }
                        if keyAt(text, k) { return l + 1 }
                    }
                    c += 1
                }
                if l > first.line - 1, let start = text.firstIndex(where: { $0 != " " }), keyAt(text, start) {
                    return l + 1
                }
                (l, c) = (l + 1, 0)
            }
            return nil
        }
        for l in first.line..<lines.count {
            let text = lines[l]
            guard let start = text.firstIndex(where: { $0 != " " }), text[start] != "#" else { continue }
            if start < indent { return nil }  // the mapping ended
            if start == indent, keyAt(text, start) { return l + 1 }
        }
        return nil
    }
}
