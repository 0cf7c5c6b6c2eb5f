import Testing
import Verifier

@Suite struct P256VerifierTests {
    /// The reused context gives the same answers as a fresh one, including
    /// after a failure (a bad signature must not poison later calls).
    @Test func reusedContextMatchesFreshContext() throws {
        let key = TestKey()
        let publicKey = try P256PublicKey(point: key.point)
        let verifier = P256Verifier(publicKey: publicKey)
        // `TestKey.sign` hashes its input: the signed digest is H(message).
        let message = Array("message".utf8)
        let digest = SHA256.hash(message)
        let other = SHA256.hash(Array("other".utf8))
        let signature = key.sign(message)
        for _ in 0..<3 {
            #expect(verifier.verify(signature: signature, digest: digest))
            #expect(publicKey.verify(signature: signature, digest: digest))
            #expect(!verifier.verify(signature: signature, digest: other))
            #expect(!publicKey.verify(signature: signature, digest: other))
            #expect(!verifier.verify(signature: [0x30, 0x00], digest: digest))
            #expect(!verifier.verify(signature: signature, digest: Array(digest.prefix(31))))
        }
        #expect(verifier.verify(signature: signature, digest: digest))
    }

    @Test func assertionVerifiesWithEitherPath() throws {
        let key = TestKey()
        let publicKey = try P256PublicKey(point: key.point)
        let authData = SHA256.hash(Array(TestPKI.appId.utf8)) + [0x40, 0, 0, 0, 9]
        let cdh = SHA256.hash(Array("request".utf8))
        let signature = key.sign(SHA256.hash(authData + cdh))
        let object = TestCBOR.map([(.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authData))])
        let parsed = try ParsedAssertion.parse(object.encoded)
        let verifier = P256Verifier(publicKey: publicKey)
        let verified = try parsed.verify(verifier: verifier, appId: TestPKI.appId, clientDataHash: cdh, previousCounter: 8)
        #expect(verified.counter == 9)
        #expect(throws: VerificationError.self) {
            _ = try parsed.verify(
                verifier: verifier, appId: TestPKI.appId, clientDataHash: SHA256.hash(Array("x".utf8)),
                previousCounter: nil)
        }
        #expect(throws: VerificationError.self) {
            _ = try parsed.verify(verifier: verifier, appId: "OTHER.app", clientDataHash: cdh, previousCounter: nil)
        }
    }

    @Test func hashOfBorrowedBytesMatchesArrayHash() {
        let empty = [UInt8]()
        #expect(Hex.encode(empty.withUnsafeBytes { SHA256.hash($0) })
            == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hash(empty) == empty.withUnsafeBytes { SHA256.hash($0) })
        let abc = Array("abc".utf8)
        #expect(Hex.encode(abc.withUnsafeBytes { SHA256.hash($0) })
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
