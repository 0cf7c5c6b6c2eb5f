import Foundation
import Testing
import Verifier

@testable import AssertGateCore

@Suite struct DeviceCheckTokenTests {
    @Test func derSignaturesBecomeFixedWidthRAndS() {
        let r = [UInt8](repeating: 0x81, count: 32)  // high bit set: DER adds a 0x00
        let s = [UInt8](repeating: 0x11, count: 31)  // a short integer: padded on the left
        let der: [UInt8] = [0x30, 2 + 33 + 2 + 31, 0x02, 33, 0x00] + r + [0x02, 31] + s
        #expect(DeviceCheckToken.rawSignature(fromDER: der) == r + [0x00] + s)
        #expect(DeviceCheckToken.rawSignature(fromDER: Array(der.dropLast())) == nil)
        #expect(DeviceCheckToken.rawSignature(fromDER: der + [0x00]) == nil)
        #expect(DeviceCheckToken.rawSignature(fromDER: [0x30, 0x00]) == nil)
        #expect(DeviceCheckToken.rawSignature(fromDER: []) == nil)
        // 33 bytes that are not a sign pad cannot be a P-256 scalar.
        let wide: [UInt8] = [0x30, 2 + 33 + 2 + 1, 0x02, 33, 0x01] + r + [0x02, 1, 0x05]
        #expect(DeviceCheckToken.rawSignature(fromDER: wide) == nil)
    }

    @Test func onlyAnUnencryptedP256KeyIsAccepted() throws {
        #expect(throws: DeviceCheckToken.KeyError.self) {
            _ = try DeviceCheckToken(pem: "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n", teamId: "T", keyId: "K")
        }
        #expect(throws: DeviceCheckToken.KeyError.notP256) {
            _ = try DeviceCheckToken(pem: try TestKeys.ecPrivateKeyPEM(curve: "P-384"), teamId: "T", keyId: "K")
        }
        _ = try DeviceCheckToken(pem: try TestKeys.ecPrivateKeyPEM(), teamId: "T", keyId: "K")
    }

    @Test func aTokenIsReusedUntilItIsOld() throws {
        let token = try DeviceCheckToken(
            pem: try TestKeys.ecPrivateKeyPEM(), teamId: "ABCDE12345", keyId: "XYZ1234567", reuseFor: 1200)
        let first = try #require(token.token(now: 1_000_000))
        #expect(token.token(now: 1_000_000 + 1199) == first)
        let second = try #require(token.token(now: 1_000_000 + 1200))
        #expect(second != first)
        token.invalidate()
        #expect(token.token(now: 1_000_000 + 1201) != second)
        // Header and claims as Apple wants them.
        let parts = first.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        #expect(String(decoding: try Base64.decode(parts[0]), as: UTF8.self) == #"{"alg":"ES256","kid":"XYZ1234567"}"#)
        #expect(String(decoding: try Base64.decode(parts[1]), as: UTF8.self) == #"{"iss":"ABCDE12345","iat":1000000}"#)
        #expect(try Base64.decode(parts[2]).count == 64)
    }
}
