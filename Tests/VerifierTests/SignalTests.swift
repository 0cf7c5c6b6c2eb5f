import Testing

@testable import Verifier

/// risk.md §1: the launch category's two encodings, its names, malformed
/// values as absent, and the key policy classification.
@Suite struct SignalTests {
    static let header = [UInt8](repeating: 0xab, count: 32) + [0x40, 0, 0, 0, 7]

    static func extensions(_ category: TestCBOR) throws -> AuthenticatorExtensions {
        let map = TestCBOR.map([(.text("apple_validation_category_01"), category)]).encoded
        return try AuthenticatorData.parseAssertion(header + map).extensions
    }

    @Test func launchCategoryAsLittleEndianBytesOrUnsignedInteger() throws {
        #expect(try Self.extensions(.bytes([4, 0, 0, 0])).launchCategory == 4)
        #expect(try Self.extensions(.bytes([0x01, 0x02, 0x00, 0x80])).launchCategory == 0x8000_0201)
        #expect(try Self.extensions(.uint(2)).launchCategory == 2)
        #expect(try Self.extensions(.uint(UInt64(UInt32.max))).launchCategory == UInt32.max)
        #expect(try Self.extensions(.uint(2)).malformedKeys.isEmpty)
    }

    @Test func malformedCategoryIsAbsentAndNamed() throws {
        for bad: TestCBOR in [.bytes([1, 0]), .bytes([1, 0, 0, 0, 0]), .text("1"), .neg(0), .uint(1 << 32)] {
            let ext = try Self.extensions(bad)
            #expect(ext.launchCategory == nil, "\(bad)")
            #expect(ext.malformedKeys == ["apple_validation_category_01"], "\(bad)")
        }
    }

    @Test func malformedBundleVersionIsAbsent() throws {
        let long = String(repeating: "9", count: AuthenticatorExtensions.maxBundleVersionBytes + 1)
        for bad: TestCBOR in [.bytes([0x31]), .text(""), .text(long)] {
            let map = TestCBOR.map([(.text("apple_bundle_version_01"), bad)]).encoded
            let ext = try AuthenticatorData.parseAssertion(Self.header + map).extensions
            #expect(ext.bundleVersion == nil)
            #expect(ext.malformedKeys == ["apple_bundle_version_01"])
        }
    }

    @Test func namesFollowApplesTable() {
        let expected = [
            "invalid", "platform", "testflight", "development", "app-store", "enterprise", "developer-id",
            "local-signing", "rosetta", "oop-jit", "none",
        ]
        for (value, name) in expected.enumerated() {
            #expect(LaunchCategory.name(UInt32(value)) == name)
            #expect(LaunchCategory.values[name] == UInt32(value))
        }
        #expect(LaunchCategory.name(11) == "11")
        #expect(LaunchCategory.name(4_000_000_000) == "4000000000")
        #expect(LaunchCategory.bytes(0x0403_0201) == [1, 2, 3, 4])
    }

    @Test func keyPolicyClassification() throws {
        // The inner 66 bytes as Apple prints them (base64), wrapped as risk.md §1 shows.
        let inner = try Base64.decode(
            "MEAMAjExMDowCQwCb2uhAwEB/zAJDAJvYaEDAQH/MAsMBG9kZWyhAwEB/zAVDARvc2duoAYMBHJzZWMwBaYDAgEB", maxLength: 200)
        #expect(inner.count == 66)
        #expect(Array(KeyPolicy.macOSFullSecurityBytes.suffix(66)) == inner)
        #expect(KeyPolicy.classify(aclBlob: KeyPolicy.macOSFullSecurityBytes) == .macosFullSecurity)
        var changed = KeyPolicy.macOSFullSecurityBytes
        changed[changed.count - 1] ^= 1
        #expect(KeyPolicy.classify(aclBlob: changed) == .other)
        #expect(KeyPolicy.classify(aclBlob: []) == .other)
        #expect(KeyPolicy.classify(aclBlob: nil) == nil)
    }
}
