import Foundation
import Testing

/// A clone has nothing beside it: no file the build, the tests, the scripts or
/// the README use may live outside the repository (the design workspace's
/// sibling `shared` folder in particular; test data is in Tests/Vectors).
@Suite struct RepositoryIndependenceTests {
    /// Written in two parts so that this file does not match itself.
    static let outside = ["../" + "shared", "/work/" + "shared"]

    static func files(under relative: String) -> [String] {
        let root = ProjectDocs.path(relative)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [relative] }
        let walker = FileManager.default.enumerator(atPath: root)
        var out: [String] = []
        while let item = walker?.nextObject() as? String {
            let full = root + "/" + item
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
                out.append(relative + "/" + item)
            }
        }
        return out.sorted()
    }

    @Test func nothingReachesOutsideTheRepository() throws {
        let places = [
            "Package.swift", "README.md", "BENCHMARKS.md", "Sources", "Tests", "Fuzz", "deploy", ".ci", "docs", "Benchmarks",
        ]
        var scanned = 0
        var offenders: [String] = []
        for place in places {
            for file in Self.files(under: place) {
                guard let data = FileManager.default.contents(atPath: ProjectDocs.path(file)),
                    let text = String(data: data, encoding: .utf8)
                else { continue }
                scanned += 1
                for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where Self.outside.contains(where: { line.contains($0) }) {
                    offenders.append("\(file):\(n + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(scanned > 100, "only \(scanned) files scanned: is the package root right?")
        #expect(offenders.isEmpty, "paths outside the repository:\n\(offenders.joined(separator: "\n"))")
    }

    /// The vectors the tests read by default are the repository's own.
    @Test func vectorsAreInTheRepository() {
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: ProjectDocs.path("Tests/Vectors/roots"), isDirectory: &isDirectory))
        #expect(isDirectory.boolValue)
        for folder in [
            "devicecheck-appattest", "attestation-gateway-worldcoin", "apple-attestation-object-validation-guide",
            "appattest-bas-d", "appattest-checker-node-srinivas1729", "go-app-attest-splitsecure",
            "node-app-attest-uebelack", "roots",
        ] {
            #expect(
                FileManager.default.fileExists(atPath: ProjectDocs.path("Tests/Vectors/\(folder)/README.md")),
                "Tests/Vectors/\(folder) has no provenance README")
        }
    }
}
