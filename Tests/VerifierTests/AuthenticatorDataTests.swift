import Testing
import Verifier

@Suite struct AuthenticatorDataTests {
    static let header = [UInt8](repeating: 0xaa, count: 32) + [0x40, 0, 0, 0, 7]
    static let point = [0x04] + [UInt8](repeating: 1, count: 32) + [UInt8](repeating: 2, count: 32)

    static func attestation(credentialId: [UInt8] = [UInt8](repeating: 9, count: 32), tail: [UInt8]? = nil) -> [UInt8] {
        header + Array("appattestdevelop".utf8) + [UInt8(credentialId.count >> 8), UInt8(credentialId.count & 0xff)]
            + credentialId + (tail ?? TestCBOR.coseKey(point).encoded)
    }

    @Test func parsesAttestationFields() throws {
        let ext = TestCBOR.map([(.text("apple_bundle_version_01"), .text("7")), (.uint(1), .uint(2))]).encoded
        let data = try AuthenticatorData.parseAttestation(Self.attestation(tail: TestCBOR.coseKey(Self.point).encoded + ext))
        #expect(data.rpIdHash == [UInt8](repeating: 0xaa, count: 32))
        #expect(data.flags == 0x40)
        #expect(data.counter == 7)
        #expect(data.attestedCredential?.aaguid == Array("appattestdevelop".utf8))
        #expect(data.attestedCredential?.credentialId == [UInt8](repeating: 9, count: 32))
        #expect(data.attestedCredential?.publicKeyBytes == TestCBOR.coseKey(Self.point).encoded)
        #expect(data.extensions.bundleVersion == "7")
        #expect(data.extensions.validationCategory == nil)
        #expect(data.extensions.entries.count == 2)
        #expect(data.extensions.raw == ext)
    }

    @Test func rejectsBadAttestationLayouts() {
        #expect(throws: AuthDataError.tooShort(length: 54, needed: 55)) {
            try AuthenticatorData.parseAttestation(Array(Self.attestation().prefix(54)))
        }
        var longId = Self.attestation()
        longId[53] = 0xff
        #expect(throws: AuthDataError.credentialIdLength(0xff20)) { try AuthenticatorData.parseAttestation(longId) }
        #expect(throws: AuthDataError.tooShort(length: 87, needed: 88)) {
            try AuthenticatorData.parseAttestation(Self.attestation(tail: []))
        }
        #expect(throws: AuthDataError.credentialKey(.truncated(offset: 88))) {
            try AuthenticatorData.parseAttestation(Self.attestation(tail: [0xa5]))
        }
        #expect(throws: AuthDataError.extensionsNotAMap) {
            try AuthenticatorData.parseAttestation(Self.attestation(tail: TestCBOR.coseKey(Self.point).encoded + [0x01]))
        }
    }

    @Test func parsesAssertionsByLengthNotFlags() throws {
        let plain = try AuthenticatorData.parseAssertion(Self.header)
        #expect(plain.attestedCredential == nil)
        #expect(plain.extensions == .none)
        #expect(plain.counter == 7)
        let ext = TestCBOR.map([(.text("apple_validation_category_01"), .bytes([1, 0, 0, 0]))]).encoded
        let withExt = try AuthenticatorData.parseAssertion(Self.header + ext)
        #expect(withExt.extensions.validationCategory == [1, 0, 0, 0])
        #expect(withExt.extensions.launchCategory == 1)
        #expect(withExt.extensions.malformedKeys.isEmpty)
        #expect(throws: AuthDataError.tooShort(length: 36, needed: 37)) {
            try AuthenticatorData.parseAssertion(Array(Self.header.prefix(36)))
        }
        // A known key of the wrong type is absent and named, never a failure (risk.md §1).
        let badVersion = try AuthenticatorData.parseAssertion(
            Self.header + TestCBOR.map([(.text("apple_bundle_version_01"), .uint(1))]).encoded)
        #expect(badVersion.extensions.bundleVersion == nil)
        #expect(badVersion.extensions.malformedKeys == ["apple_bundle_version_01"])
        #expect(throws: AuthDataError.extensions(.trailingBytes(offset: 38, count: 1))) {
            try AuthenticatorData.parseAssertion(Self.header + [0xa0, 0x00])
        }
    }
}
