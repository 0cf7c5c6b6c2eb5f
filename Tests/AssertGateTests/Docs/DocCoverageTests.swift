import Foundation
import Testing
import Verifier
@testable import AssertGateCore

/// The reference documents name everything the code accepts or answers: a
/// config key the parser accepts, or a reason token the gateway can send,
/// that the docs leave out fails here.
@Suite struct DocCoverageTests {
    @Test func everyConfigKeyTheParserAcceptsIsInConfigMd() throws {
        let doc = try ProjectDocs.text("docs/config.md")
        let paths = ConfigSection.documentedKeyPaths
        #expect(paths.count > 80, "the key table looks truncated: \(paths.count) paths")
        let missing = paths.filter { !doc.contains("`\($0)`") }
        #expect(missing.isEmpty, "docs/config.md does not document: \(missing.joined(separator: ", "))")
    }

    @Test func everyReasonTokenIsInProtocolMdWithItsStatus() throws {
        let lines = try ProjectDocs.text("docs/protocol.md").split(separator: "\n").map(String.init)
        var missing: [String] = []
        for token in ReasonToken.allCases {
            let row = "| `\(token.rawValue)` | \(token.httpStatus) |"
            if !lines.contains(where: { $0.hasPrefix(row) }) { missing.append("\(token.rawValue) (\(token.httpStatus))") }
        }
        #expect(missing.isEmpty, "docs/protocol.md §5 has no row '| `token` | status |' for: \(missing.joined(separator: ", "))")
    }

    /// Relative links of README.md, BENCHMARKS.md and docs/ lead to files
    /// that exist, and links into docs/ to headings that exist.
    @Test func relativeLinksResolve() throws {
        var broken: [String] = []
        for file in try ProjectDocs.markdownFiles() {
            let text = try ProjectDocs.text(file)
            let directory = (file as NSString).deletingLastPathComponent
            for (target, line) in ProjectDocs.links(text) {
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let pathPart = String(parts[0])
                let fragment = parts.count > 1 ? String(parts[1]) : nil
                let resolved = pathPart.isEmpty
                    ? file : (((directory.isEmpty ? "" : directory + "/") + pathPart) as NSString).standardizingPath
                guard FileManager.default.fileExists(atPath: ProjectDocs.path(resolved)) else {
                    broken.append("\(file):\(line): \(target) (no file \(resolved))")
                    continue
                }
                if let fragment, resolved.hasSuffix(".md"),
                    resolved.hasPrefix("docs/") || file.hasPrefix("docs/"),
                    !ProjectDocs.anchors(try ProjectDocs.text(resolved)).contains(fragment)
                {
                    broken.append("\(file):\(line): \(target) (no heading #\(fragment) in \(resolved))")
                }
            }
        }
        #expect(broken.isEmpty, "\(broken.joined(separator: "\n"))")
    }

    /// What the code, the deploy files and the README tell a reader to open
    /// under docs/ exists: `--help` texts, comments, example configs.
    @Test func docsPathsNamedInSourcesAndReadmeExist() throws {
        var named: [String: String] = [:]
        let files = ["README.md"] + RepositoryIndependenceTests.files(under: "Sources").filter { $0.hasSuffix(".swift") }
            + RepositoryIndependenceTests.files(under: "deploy")
        for file in files {
            let text = try ProjectDocs.text(file)
            var rest = Substring(text)
            while let start = rest.range(of: "docs/") {
                let name = rest[start.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }
                if name.hasSuffix(".md") || name.hasSuffix(".md.") {
                    let doc = "docs/" + (name.hasSuffix(".") ? name.dropLast() : name)
                    named[doc] = named[doc] ?? file
                }
                rest = rest[start.upperBound...]
            }
        }
        #expect(named["docs/config.md"] != nil, "nothing names docs/config.md")
        let missing = named.keys.sorted().filter { !FileManager.default.fileExists(atPath: ProjectDocs.path($0)) }
        #expect(missing.isEmpty, "named but absent: \(missing.map { "\($0) (in \(named[$0] ?? "?"))" })")
    }
}
