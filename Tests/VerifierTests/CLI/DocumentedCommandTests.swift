import Foundation
import Testing

/// The `assertgate verify-attestation` examples of README.md and docs/cli.md,
/// run as written from the package root: the files they name are in the
/// repository and the verdict is ok.
@Suite struct DocumentedCommandTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// Every shell command in `text` that starts with `assertgate verify-`,
    /// its `\` continuations joined, split into words as sh would (single
    /// quotes only: that is all the examples use).
    static func examples(_ text: String) -> [[String]] {
        var commands: [[String]] = []
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed.hasPrefix("assertgate verify-"), !trimmed.contains("FILE") {
                current = ""
            }
            guard var command = current else { continue }
            let continued = trimmed.hasSuffix("\\")
            command += " " + (continued ? String(trimmed.dropLast()) : trimmed)
            if continued {
                current = command
            } else {
                commands.append(words(command))
                current = nil
            }
        }
        return commands
    }

    static func words(_ command: String) -> [String] {
        var out: [String] = []
        var word = ""
        var quoted = false
        var inWord = false
        for ch in command {
            if ch == "'" {
                quoted.toggle()
                inWord = true
            } else if ch.isWhitespace && !quoted {
                if inWord { out.append(word) }
                word = ""
                inWord = false
            } else {
                word.append(ch)
                inWord = true
            }
        }
        if inWord { out.append(word) }
        return out
    }

    @Test(arguments: ["README.md", "docs/cli.md"])
    func verifyAttestationExampleRunsFromAClone(_ document: String) throws {
        let text = try String(contentsOf: Self.packageRoot.appendingPathComponent(document), encoding: .utf8)
        let commands = Self.examples(text)
        #expect(!commands.isEmpty, "\(document) has no runnable assertgate verify-* example")
        for command in commands {
            #expect(command.first == "assertgate")
            let process = Process()
            process.executableURL = try OfflineCLITests.binary()
            process.arguments = Array(command.dropFirst())
            process.currentDirectoryURL = Self.packageRoot
            let out = Pipe()
            process.standardOutput = out
            process.standardError = Pipe()
            try process.run()
            let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(document): \(command.joined(separator: " ")) → \(stdout)")
            #expect(stdout.contains("\"ok\":true"), "\(stdout)")
        }
    }
}
