import DeviceSim
import Testing

@Suite("SimDevice.assert")
struct AssertionTests {
    static let clientDataHash = OpenSSLChecks.sha256(Array("assertgate-assert-v1\nGET\n/v1/items\n\ne3b0".utf8))

    @Test("the assertion has the §1 layout and its signature verifies over H(authData ‖ clientDataHash)")
    func valid() throws {
        let device = try Fixture.shared().device()
        let object = try device.assert(clientDataHash: Self.clientDataHash, appId: Fixture.appId, counter: 0x0102_0304)
        let parsed = try ParsedAssertion(object)
        #expect(parsed.authenticatorData.count == 37)
        #expect(parsed.rpIdHash == OpenSSLChecks.sha256(Array(Fixture.appId.utf8)))
        #expect(parsed.flags == 0x40)
        #expect(Array(parsed.authenticatorData[33..<37]) == [1, 2, 3, 4])
        let nonce = OpenSSLChecks.sha256(parsed.authenticatorData + Self.clientDataHash)
        #expect(OpenSSLChecks.verify(signature: parsed.signature, message: nonce, point: device.publicKey))
        // The signed digest is H(nonce), not the nonce itself nor the raw data.
        #expect(!OpenSSLChecks.verify(signature: parsed.signature,
                                      message: parsed.authenticatorData + Self.clientDataHash, point: device.publicKey))
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: device.publicKey, clientDataHash: Self.clientDataHash, storedCounter: 0) == nil)
    }

    @Test("a counter not above the stored one is a replay")
    func replay() throws {
        let device = try Fixture.shared().device()
        let object = try device.assert(clientDataHash: Self.clientDataHash, appId: Fixture.appId, counter: 5)
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: device.publicKey, clientDataHash: Self.clientDataHash, storedCounter: 4) == nil)
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: device.publicKey, clientDataHash: Self.clientDataHash, storedCounter: 5) == "counter-replay")
    }

    @Test("the signature binds the clientDataHash")
    func bindsClientData() throws {
        let device = try Fixture.shared().device()
        let object = try device.assert(clientDataHash: Self.clientDataHash, appId: Fixture.appId, counter: 1)
        var other = Self.clientDataHash
        other[0] ^= 1
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: device.publicKey, clientDataHash: other, storedCounter: 0) == "bad-signature")
    }

    @Test("the assertion verifies with the key certified by the device's attestation")
    func matchesAttestedKey() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let attestation = try ParsedAttestation(
            device.attest(clientDataHash: Fixture.clientDataHash, appId: Fixture.appId, at: Fixture.time))
        let leafPoint = try require(OpenSSLChecks.publicPoint(attestation.x5c[0]))
        let object = try device.assert(clientDataHash: Self.clientDataHash, appId: Fixture.appId, counter: 1)
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: leafPoint, clientDataHash: Self.clientDataHash, storedCounter: 0) == nil)
    }

    @Test("iOS 27 extensions follow the 37 bytes and are signed")
    func extensions() throws {
        let device = try Fixture.shared().device()
        let object = try device.assert(
            clientDataHash: Self.clientDataHash, appId: Fixture.appId, counter: 2,
            extensions: AuthenticatorExtensions(bundleVersion: "42"))
        let parsed = try ParsedAssertion(object)
        #expect(parsed.extensions?["apple_bundle_version_01"] == .text("42"))
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: device.publicKey, clientDataHash: Self.clientDataHash, storedCounter: 1) == nil)
    }

    @Test("a saved device loads with the same key and keeps asserting")
    func persistence() throws {
        let fixture = try Fixture.shared()
        let device = try fixture.device()
        let path = try TemporaryDirectory.make() + "/device.key.pem"
        try device.save(to: path)
        let loaded = try SimDevice.load(path: path, ca: fixture.ca, receiptCA: fixture.receiptCA)
        #expect(loaded.keyId == device.keyId)
        let object = try loaded.assert(clientDataHash: Self.clientDataHash, appId: Fixture.appId, counter: 9)
        #expect(ReferenceChecks.assertionFailure(
            object, publicKey: device.publicKey, clientDataHash: Self.clientDataHash, storedCounter: 8) == nil)
    }

    @Test("one device signs correctly from many tasks at once (shared signing template)")
    func concurrentAssertions() async throws {
        let device = try Fixture.shared().device()
        let failures = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var failures = 0
                    for i in 0..<100 {
                        let counter = UInt32(task * 1000 + i + 1)
                        let object = try device.assert(clientDataHash: Self.clientDataHash, appId: Fixture.appId, counter: counter)
                        if ReferenceChecks.assertionFailure(object, publicKey: device.publicKey,
                                                            clientDataHash: Self.clientDataHash, storedCounter: counter - 1) != nil {
                            failures += 1
                        }
                    }
                    return failures
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(failures == 0)
    }
}
