import AppleMock
import AssertGateTestSupport
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import AssertGateCore

/// `assertgate-device apple-mock` and `device-token` as a demo runs them: the
/// client gets the standing answer given on the command line, the control
/// request changes it, and the tokens the tool prints are accepted.
@Suite struct AppleMockCommandTests {
    @Test func theCommandServesTheMockAndItsControlRequests() async throws {
        guard let tool = BuiltProduct.path("assertgate-device") else {
            Issue.record("assertgate-device is not built next to the tests")
            return
        }
        let pki = try await TestPKI.shared.value
        let (privatePEM, publicPEM) = try await AppleMockFixture.keyPair()
        let publicPath = NSTemporaryDirectory() + "assertgate-dc-pub-\(UUID().uuidString).pem"
        try publicPEM.write(toFile: publicPath, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: publicPath) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = [
            "apple-mock", "--cert", pki.serverCertificate, "--key", pki.serverKey, "--jwt-public-key", publicPath,
            "--answer", "query_two_bits=429",
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { process.terminate() }
        // The first line names the port: a blocking read, no polling.
        let banner = await Task.detached { () -> String in
            var text = ""
            while !text.contains("\n") {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            return text
        }.value
        let line = try #require(banner.split(separator: "\n").first.map(String.init), "no banner")
        let url = try #require(line.split(separator: " ").last.map(String.init), "\(line)")
        #expect(line.hasPrefix("apple-mock listening on https://127.0.0.1:"), "\(line)")

        let made = try await Run.tool(tool, ["device-token", "--device", "phone-1", "--count", "2"])
        let tokens = made.stdout.split(separator: "\n").map(String.init)
        #expect(tokens.count == 2 && tokens[0] != tokens[1])
        #expect(tokens.allSatisfy { MockDeviceToken.device(in: $0) == "phone-1" })

        var config = DeviceCheckConfig(
            teamId: "ABCDE12345", keyId: "XYZ1234567", privateKey: Secret(source: .inline, value: privatePEM))
        config.baseURL = url
        config.developmentBaseURL = url
        config.caFile = pki.caCertificate
        let client = try DeviceCheckClient(config: config)
        defer { client.closeIdle() }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        #expect(try await client.query(deviceToken: tokens[0], environment: .production, on: loop).get() == .throttled)
        #expect(
            try await client.update(deviceToken: tokens[0], bit0: nil, bit1: true, environment: .production, on: loop).get()
                == .updated)
        // The control request lifts the standing 429.
        let control = try await client.production.post(
            path: "/mock/always?endpoint=query_two_bits&answer=normal", authorization: "", body: [], on: loop
        ).get()
        #expect(control.status == 200)
        guard case .bits(let bits) = try await client.query(deviceToken: tokens[1], environment: .production, on: loop).get()
        else {
            Issue.record("no bits after the update")
            return
        }
        #expect(bits.bit0 == false && bits.bit1 == true)
    }
}
