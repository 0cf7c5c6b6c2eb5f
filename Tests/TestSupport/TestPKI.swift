import Foundation

/// A throw-away CA with a server certificate (127.0.0.1 and localhost) and a
/// client certificate it signed, plus a second CA that signed nothing here:
/// what a TLS Redis and its clients need. Made once per test process with
/// the `openssl` CLI, in a directory that lives as long as the process.
public struct TestPKI: Sendable {
    public let caCertificate: String
    public let serverCertificate: String
    public let serverKey: String
    public let clientCertificate: String
    public let clientKey: String
    /// A CA unrelated to the certificates above.
    public let otherCACertificate: String

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static let shared = Task { try await make() }

    /// The TLS options of a `RedisServerFixture` serving this PKI's server certificate.
    public func redisServer(requireClientCertificate: Bool) -> RedisServerFixture.TLS {
        .init(
            certificate: serverCertificate, privateKey: serverKey, caCertificate: caCertificate,
            requireClientCertificate: requireClientCertificate)
    }

    private static func make() async throws -> TestPKI {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("assertgate-pki-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func path(_ name: String) -> String { dir + "/" + name }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"]
        for ca in ["ca", "other-ca"] {
            try await openssl(["req", "-x509"] + ec + [
                "-keyout", path("\(ca).key"), "-out", path("\(ca).crt"), "-subj", "/CN=AssertGate test \(ca)",
            ])
        }
        try await openssl(["req", "-x509", "-CA", path("ca.crt"), "-CAkey", path("ca.key")] + ec + [
            "-keyout", path("server.key"), "-out", path("server.crt"), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ])
        try await openssl(["req", "-x509", "-CA", path("ca.crt"), "-CAkey", path("ca.key")] + ec + [
            "-keyout", path("client.key"), "-out", path("client.crt"), "-subj", "/CN=assertgate",
        ])
        return TestPKI(
            caCertificate: path("ca.crt"), serverCertificate: path("server.crt"), serverKey: path("server.key"),
            clientCertificate: path("client.crt"), clientKey: path("client.key"), otherCACertificate: path("other-ca.crt"))
    }

    private static func openssl(_ arguments: [String]) async throws {
        let result = try await Run.tool("openssl", arguments)
        guard result.status == 0 else {
            throw Failure(description: "openssl \(arguments.prefix(2).joined(separator: " ")) failed: \(result.stderr)")
        }
    }
}
