/// One problem found in a config file, located by file and line.
public struct ConfigDiagnostic: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    /// 1-based; nil when the problem is not tied to a line (unreadable file).
    public var line: Int?
    /// 1-based, in characters; set only where the column is known (YAML syntax errors).
    public var column: Int?
    public var message: String

    public init(file: String, line: Int?, column: Int? = nil, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    /// `file:line: message` (or `file:line:column: message`), the form editors and CI logs understand.
    public var description: String {
        if let line, let column { return "\(file):\(line):\(column): \(message)" }
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }
}

/// Every problem found while loading a config file (not only the first).
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var diagnostics: [ConfigDiagnostic]

    public init(diagnostics: [ConfigDiagnostic]) {
        self.diagnostics = diagnostics
    }

    public var description: String {
        diagnostics.map(\.description).joined(separator: "\n")
    }
}
