import AppleMock
import AssertGateTestSupport
import Foundation
import NIOCore
import NIOPosix

@testable import AssertGateCore

/// Two Apple mocks (production and development hosts) over TLS on
/// 127.0.0.1, and a DeviceCheckClient pointed at them, signing with a fresh
/// key whose public half the mocks check.
struct AppleMockFixture {
    let production: AppleMockServer
    let development: AppleMockServer
    let client: DeviceCheckClient
    let privateKeyPEM: String
    let loop: EventLoop

    static func start(timeout: TimeAmount = .seconds(5)) async throws -> AppleMockFixture {
        let pki = try await TestPKI.shared.value
        let (privatePEM, publicPEM) = try await keyPair()
        var options = AppleMockOptions(certificatePath: pki.serverCertificate, privateKeyPath: pki.serverKey)
        options.jwtPublicKeyPEM = publicPEM
        let production = try await AppleMockServer(options)
        let development = try await AppleMockServer(options)
        let client = try makeClient(
            privateKeyPEM: privatePEM, production: production, development: development, caFile: pki.caCertificate,
            timeout: timeout)
        return AppleMockFixture(
            production: production, development: development, client: client, privateKeyPEM: privatePEM,
            loop: MultiThreadedEventLoopGroup.singleton.next())
    }

    static func makeClient(
        privateKeyPEM: String, production: AppleMockServer, development: AppleMockServer, caFile: String,
        timeout: TimeAmount
    ) throws -> DeviceCheckClient {
        var config = DeviceCheckConfig(
            teamId: "ABCDE12345", keyId: "XYZ1234567", privateKey: Secret(source: .inline, value: privateKeyPEM))
        config.baseURL = production.baseURL
        config.developmentBaseURL = development.baseURL
        config.caFile = caFile
        config.timeout = timeout
        return try DeviceCheckClient(config: config)
    }

    /// A P-256 key as PKCS#8 PEM and its public key as PEM.
    static func keyPair() async throws -> (privatePEM: String, publicPEM: String) {
        let path = NSTemporaryDirectory() + "assertgate-dc-\(UUID().uuidString).p8"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let made = try await Run.tool(
            "openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
        guard made.status == 0 else { throw FixtureError("openssl genpkey: \(made.stderr)") }
        let pub = try await Run.tool("openssl", ["pkey", "-in", path, "-pubout"])
        guard pub.status == 0 else { throw FixtureError("openssl pkey: \(pub.stderr)") }
        return (try String(contentsOfFile: path, encoding: .utf8), pub.stdout)
    }

    func stop() async throws {
        client.closeIdle()
        try await production.stop()
        try await development.stop()
    }

    struct FixtureError: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }
}
