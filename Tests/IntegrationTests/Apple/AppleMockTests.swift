import GatewayTLS
import AppleMock
import AssertGateTestSupport
import Foundation
import NIOCore
import Testing
import Verifier

@testable import AssertGateCore

/// The Apple mock itself: its device tokens, its JWT check, its bits.
@Suite struct AppleMockTests {
    @Test func deviceTokensNameTheirDeviceAndForgeriesAreRefused() throws {
        let a = try MockDeviceToken.make(device: "alice")
        let b = try MockDeviceToken.make(device: "alice")
        #expect(a != b, "each token has its own nonce")
        #expect(MockDeviceToken.device(in: a) == "alice")
        #expect(MockDeviceToken.device(in: b) == "alice")
        #expect(MockDeviceToken.device(in: a, secret: Array("other".utf8)) == nil)
        // Any byte changed breaks the MAC.
        var bytes = try Base64.decode(a)
        for i in [0, 6, 22, bytes.count - 1] {
            var forged = bytes
            forged[i] ^= 0x01
            #expect(MockDeviceToken.device(in: Base64.encode(forged)) == nil, "byte \(i)")
        }
        bytes[22] = 200  // a name length past the end
        #expect(MockDeviceToken.device(in: Base64.encode(bytes)) == nil)
        #expect(MockDeviceToken.device(in: "") == nil)
        #expect(MockDeviceToken.device(in: "not base64!") == nil)
        #expect(MockDeviceToken.device(in: String(repeating: "A", count: 100_000)) == nil)
        #expect(throws: MockDeviceToken.MakeError.self) { _ = try MockDeviceToken.make(device: "") }
        #expect(throws: MockDeviceToken.MakeError.self) {
            _ = try MockDeviceToken.make(device: String(repeating: "x", count: 65))
        }
    }

    @Test func aJWTSignedByAnotherKeyOrMissingIsRefusedAsAppleDoes() async throws {
        let f = try await AppleMockFixture.start()
        let (otherKey, _) = try await AppleMockFixture.keyPair()
        let stranger = try DeviceCheckToken(pem: otherKey, teamId: "ABCDE12345", keyId: "XYZ1234567")
        let own = try DeviceCheckToken(pem: f.privateKeyPEM, teamId: "ABCDE12345", keyId: "XYZ1234567")
        let now = Int64(Date().timeIntervalSince1970)
        let pki = try await TestPKI.shared.value
        let tls = try TLSClientContext(caFile: pki.caCertificate, certificatePath: nil, privateKeyPath: nil)
        let http = try #require(AppleHTTPSClient(baseURL: f.production.baseURL, tls: tls, timeout: .seconds(5)))
        let body = DeviceCheckRequestBody(
            deviceToken: try MockDeviceToken.make(device: "alice"), transactionId: "t1", timestampMillis: now * 1000)
        func status(_ authorization: String) async throws -> (Int, String) {
            let r = try await http.post(
                path: "/v1/validate_device_token", authorization: authorization, contentType: "application/json",
                body: body.json, on: f.loop
            ).get()
            return (r.status, String(decoding: r.body, as: UTF8.self))
        }
        let good = try #require(own.token(now: now))
        #expect(try await status("Bearer " + good).0 == 200)
        #expect(try await status("Bearer " + (try #require(stranger.token(now: now)))) == (401, "Unable to verify authorization token"))
        // Too old (Apple takes a token for an hour), and from the future.
        #expect(try await status("Bearer " + (try #require(own.sign(issuedAt: now - 3700)))).0 == 401)
        #expect(try await status("Bearer " + (try #require(own.sign(issuedAt: now + 600)))).0 == 401)
        #expect(try await status(good) == (400, "Missing or badly formatted authorization token"))
        #expect(try await status("Bearer x.y.z").0 == 400)
        // Damaged signature.
        var parts = good.split(separator: ".").map(String.init)
        parts[2] = String(parts[2].reversed())
        #expect(try await status("Bearer " + parts.joined(separator: ".")).0 != 200)
        http.closeIdle()
        try await f.stop()
    }

    @Test func bitsAreKeptPerDeviceAndUpdatesKeepTheOtherBit() async throws {
        let f = try await AppleMockFixture.start()
        func update(_ device: String, _ bit0: Bool?, _ bit1: Bool?) async throws -> DeviceCheckResult {
            try await f.client.update(
                deviceToken: try MockDeviceToken.make(device: device), bit0: bit0, bit1: bit1, environment: .production,
                on: f.loop
            ).get()
        }
        #expect(try await update("a", true, nil) == .updated)
        #expect(try await update("a", nil, true) == .updated)
        #expect(try await update("b", false, false) == .updated)
        #expect(f.production.bits(device: "a").map { [$0.bit0, $0.bit1] } == [true, true])
        #expect(f.production.bits(device: "b").map { [$0.bit0, $0.bit1] } == [false, false])
        f.production.setBits(MockDeviceBits(bit0: false, bit1: true, lastUpdate: "2017-06"), device: "c")
        #expect(
            try await f.client.query(deviceToken: try MockDeviceToken.make(device: "c"), environment: .production, on: f.loop)
                .get() == .bits(DeviceCheckBits(bit0: false, bit1: true, lastUpdate: "2017-06")))
        f.production.reset()
        #expect(f.production.bits(device: "a") == nil)
        #expect(f.production.requests.isEmpty)
        try await f.stop()
    }

    @Test func answerSpecsOfTheCLI() {
        #expect(AppleMockAnswer(spec: "429") == .status(429, "Too many requests"))
        #expect(AppleMockAnswer(spec: "503:down") == .status(503, "down"))
        #expect(AppleMockAnswer(spec: "never-set") == .failedToFindBitState)
        #expect(AppleMockAnswer(spec: "never-set:Bit State Not Found") == .bitStateNotFound)
        #expect(AppleMockAnswer(spec: "stall") == .stall)
        #expect(AppleMockAnswer(spec: "receipt:7") == .receipt(riskMetric: 7, notBeforeInSeconds: nil))
        #expect(AppleMockAnswer(spec: "99") == nil)
        #expect(AppleMockAnswer(spec: "slow") == nil)
        #expect(AppleMockServer.queryItems("/mock/bits?device=a%20b&x=1") == ["device": "a b", "x": "1"])
    }
}
