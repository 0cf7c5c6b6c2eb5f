import Foundation
import Testing
import Verifier

@Suite struct P256PublicKeyTests {
    @Test func rejectsInvalidPoints() {
        #expect(throws: P256PublicKey.ParseError.notUncompressedP256Point) { try P256PublicKey(point: [0x04]) }
        var compressed = [UInt8](repeating: 1, count: 65)
        compressed[0] = 0x02
        #expect(throws: P256PublicKey.ParseError.notUncompressedP256Point) { try P256PublicKey(point: compressed) }
        var offCurve = [UInt8](repeating: 1, count: 65)
        offCurve[0] = 0x04
        #expect(throws: P256PublicKey.ParseError.notOnCurve) { try P256PublicKey(point: offCurve) }
        #expect(throws: P256PublicKey.ParseError.invalidPEM) { try P256PublicKey(pem: "nope") }
    }

    @Test func pemSpkiAndPointAgree() throws {
        let doc = try #require(try DeviceCheckDocument.load("ios-14.4").first { $0.type == "attestation" })
        let pem = try #require(doc.string("publicKey"))
        let fromPEM = try P256PublicKey(pem: pem)
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let fromSPKI = try P256PublicKey(spki: try Vectors.base64(body))
        #expect(fromPEM.point == fromSPKI.point)
        #expect(try P256PublicKey(point: fromPEM.point).point == fromPEM.point)
        #expect(SHA256.hash(fromPEM.point) == (try Vectors.base64(try #require(doc.string("keyIdBase64")))))
    }

    @Test func rejectsNonP256Keys() throws {
        // Apple Root CA - G3 is a P-384 key: its SPKI must be refused.
        let pem = try Vectors.text("roots/Apple_Root_CA_G3.pem")
        _ = pem
        let p384SPKI = try Vectors.base64(
            "MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEmOkvPUBypO2TInKBExzdEJXxxaNOcdwUFtkO5aYFKndke19OONO7HES1f/UftjJiXcnphFtPME8RWgD9WFgMpfUPLE0HRxN12peXl28xXO0rnXsgO9i5VNlemaQ6UQox")
        #expect(throws: P256PublicKey.ParseError.notP256) { try P256PublicKey(spki: p384SPKI) }
    }

    /// One cached key verifying from several threads at once.
    @Test func concurrentVerificationWithOneKey() async throws {
        let item = AssertionCase.basD
        let key = try item.key()
        let bytes = try item.bytes()
        let hash = try item.clientDataHash()
        let parsed = try ParsedAssertion.parse(bytes)
        let results = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var ok = 0
                    for _ in 0..<50 {
                        if (try? parsed.verify(publicKey: key, appId: item.appId, clientDataHash: hash, previousCounter: 0)) != nil {
                            ok += 1
                        }
                    }
                    return ok
                }
            }
            return await group.reduce(0, +)
        }
        #expect(results == 400)
    }
}
