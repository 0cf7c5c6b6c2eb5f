import Foundation

/// A fresh directory under the system temp dir, removed by `remove()`.
struct TempDir {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "assertgate-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        path = base.path
    }

    @discardableResult
    func write(_ name: String, _ contents: String) throws -> String {
        let full = path + "/" + name
        let dir = (full as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try contents.write(toFile: full, atomically: true, encoding: .utf8)
        return full
    }

    /// Placeholder PEM files: the loader checks presence and labels, not contents.
    func writeCertAndKey(cert: String = "certs/tls.crt", key: String = "certs/tls.key") throws -> (String, String) {
        let c = try write(cert, "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
        let k = try write(key, "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n")
        return (c, k)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// The package root, found from this source file's location.
enum PackagePaths {
    static var root: String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.path
    }

    /// The directory holding the built products (next to the test bundle).
    static var productsDirectory: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
        while url.path != "/" && url.path.contains(".xctest") { url.deleteLastPathComponent() }
        return url.path
    }
}
