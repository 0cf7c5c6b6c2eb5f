import Foundation

/// The repository's own documents (README.md, docs/), read from the package root.
enum ProjectDocs {
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    static func path(_ relative: String) -> String { PackagePaths.root + "/" + relative }

    static func text(_ relative: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path(relative)) else {
            throw Missing(description: "cannot read \(path(relative))")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The markdown files whose links are checked: README.md, BENCHMARKS.md and docs/*.md.
    static func markdownFiles() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: path("docs"))
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return ["README.md", "BENCHMARKS.md"] + docs
    }

    /// The YAML under "## A full example" in docs/config.md.
    static func configMdFullExample() throws -> String {
        guard let block = fencedBlock(after: "## A full example", in: try text("docs/config.md")) else {
            throw Missing(description: "docs/config.md has no code block under '## A full example'")
        }
        return block
    }

    /// The body of the first fenced code block after the line `heading`.
    static func fencedBlock(after heading: String, in text: String) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0 == heading }) else { return nil }
        guard let open = lines[start...].firstIndex(where: { $0.hasPrefix("```") }) else { return nil }
        guard let close = lines[(open + 1)...].firstIndex(where: { $0.hasPrefix("```") }) else { return nil }
        return lines[(open + 1)..<close].joined(separator: "\n") + "\n"
    }

    /// GitHub's anchor for a heading: lower-cased, punctuation dropped
    /// (hyphens and underscores kept), spaces turned into hyphens.
    static func anchor(_ heading: String) -> String {
        var out = ""
        for ch in heading.lowercased() {
            if ch == " " {
                out.append("-")
            } else if ch == "-" || ch == "_" || ch.isLetter || ch.isNumber {
                out.append(ch)
            }
        }
        return out
    }

    /// The anchors of every heading of a markdown text.
    static func anchors(_ text: String) -> Set<String> {
        var out: Set<String> = []
        var inFence = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inFence.toggle() }
            guard !inFence, line.hasPrefix("#") else { continue }
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            out.insert(anchor(title))
        }
        return out
    }

    /// `(target, line)` of every inline link `[text](target)` outside code blocks.
    static func links(_ text: String) -> [(target: String, line: Int)] {
        var out: [(String, Int)] = []
        var inFence = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("```") { inFence.toggle() }
            if inFence { continue }
            var rest = Substring(line)
            while let close = rest.range(of: "](") {
                let after = rest[close.upperBound...]
                guard let end = after.firstIndex(of: ")") else { break }
                out.append((String(after[..<end]), index + 1))
                rest = after[after.index(after: end)...]
            }
        }
        return out
    }
}
