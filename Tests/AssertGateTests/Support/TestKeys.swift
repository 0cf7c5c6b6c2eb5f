import Foundation

enum TestKeys {
    /// A fresh PKCS#8 PEM EC private key on `curve`, made by the openssl CLI
    /// (a quick child process; fine from a synchronous test).
    static func ecPrivateKeyPEM(curve: String = "P-256") throws -> String {
        let path = NSTemporaryDirectory() + "assertgate-key-\(UUID().uuidString).pem"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\(curve)", "-out", path]
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return try String(contentsOfFile: path, encoding: .utf8)
    }
}
