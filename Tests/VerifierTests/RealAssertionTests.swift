import Foundation
import Testing
import Verifier

/// One real assertion with its key and inputs.
struct AssertionCase: CustomTestStringConvertible, Sendable {
    let name: String
    let appId: String
    let counter: UInt32
    let bytes: @Sendable () throws -> [UInt8]
    let key: @Sendable () throws -> P256PublicKey
    let clientDataHash: @Sendable () throws -> [UInt8]

    var testDescription: String { name }

    func verify(previousCounter: UInt32? = 0, appId: String? = nil, clientDataHash: [UInt8]? = nil) throws
        -> VerifiedAssertion
    {
        try AssertionVerifier.verifyAssertion(
            bytes(), publicKey: key(), appId: appId ?? self.appId,
            clientDataHash: clientDataHash ?? self.clientDataHash(), previousCounter: previousCounter)
    }

    static let worldcoinAppId = "35RXKB6738.org.worldcoin.insight.staging"

    static func worldcoin() throws -> [AssertionCase] {
        guard let manifest = try Vectors.json("attestation-gateway-worldcoin/manifest.json") as? [[String: Any]] else {
            return []
        }
        return manifest.compactMap { entry -> AssertionCase? in
            guard entry["type"] as? String == "assertion", let file = entry["file"] as? String,
                let clientData = entry["clientData_utf8"] as? String, let spki = entry["public_key_spki_b64"] as? String,
                let counter = entry["counter"] as? Int
            else { return nil }
            return AssertionCase(
                name: "worldcoin/\(file)", appId: worldcoinAppId, counter: UInt32(counter),
                bytes: { try Vectors.base64(Vectors.text("attestation-gateway-worldcoin/\(file)")) },
                key: { try P256PublicKey(spki: Vectors.base64(spki)) },
                clientDataHash: { Vectors.sha256(clientData) })
        }
    }

    static let basD = AssertionCase(
        name: "bas-d", appId: "35MFYY2JY5.co.chiff.attestation-test", counter: 3,
        bytes: {
            let json = try Vectors.json("appattest-bas-d/assertion.json") as? [String: String] ?? [:]
            return try Vectors.base64(json["assertion"] ?? "")
        },
        key: { try P256PublicKey(point: Vectors.hex(Vectors.text("appattest-bas-d/assertion_public_key.hex"))) },
        clientDataHash: {
            let json = try Vectors.json("appattest-bas-d/assertion.json") as? [String: String] ?? [:]
            return SHA256.hash(try Vectors.base64(json["clientData"] ?? ""))
        })

    static let srinivas = AssertionCase(
        name: "srinivas1729", appId: "979F6L8R8M.org.reactjs.native.example.RNClientAttest", counter: 1,
        bytes: {
            let json = try Vectors.json("appattest-checker-node-srinivas1729/testData.json") as? [String: Any] ?? [:]
            return try Vectors.base64(json["REQUEST_ASSERTION_BASE64"] as? String ?? "")
        },
        key: {
            let json = try Vectors.json("appattest-checker-node-srinivas1729/testData.json") as? [String: Any] ?? [:]
            return try P256PublicKey(pem: json["EXPECTED_PUBLIC_KEY_PEM"] as? String ?? "")
        },
        clientDataHash: {
            let json = try Vectors.json("appattest-checker-node-srinivas1729/testData.json") as? [String: Any] ?? [:]
            let uuid = (json["REQUEST_CHALLENGE_STR"] as? String ?? "").replacingOccurrences(of: "-", with: "")
            let data = try Vectors.hex(uuid).map(String.init).joined(separator: ",")
            let clientData =
                "{\"action\":\"getGameLevel\",\"challenge\":{\"data\":[\(data)],\"type\":\"Buffer\"},\"levelId\":1234}"
            return Vectors.sha256(clientData)
        })

    static let uebelack = AssertionCase(
        name: "uebelack", appId: "V8H6LQ9448.io.uebelacker.AppAttestExample", counter: 1,
        bytes: {
            let json = try Vectors.json("node-app-attest-uebelack/assertion.json") as? [String: String] ?? [:]
            return try Vectors.base64(json["assertion_base64"] ?? "")
        },
        key: {
            let json = try Vectors.json("node-app-attest-uebelack/assertion.json") as? [String: String] ?? [:]
            return try P256PublicKey(pem: json["publicKey_pem"] ?? "")
        },
        clientDataHash: {
            let json = try Vectors.json("node-app-attest-uebelack/assertion.json") as? [String: String] ?? [:]
            return Vectors.sha256(json["payload_utf8"] ?? "")
        })

    static var fixed: [AssertionCase] { [basD, srinivas, uebelack] }
}

@Suite struct RealAssertionTests {
    @Test(arguments: AssertionCase.fixed)
    func verifies(_ item: AssertionCase) throws {
        let result = try item.verify()
        #expect(result.counter == item.counter)
        #expect(result.extensions.isEmpty)
    }

    @Test func worldcoinAssertionsVerify() throws {
        let cases = try AssertionCase.worldcoin()
        #expect(cases.count == 3)
        for item in cases {
            let result = try item.verify()
            #expect(result.counter == item.counter, "\(item.name)")
        }
    }

    @Test func assertionAuthDataHasATSetWithoutCredentialData() throws {
        for item in AssertionCase.fixed {
            let parsed = try ParsedAssertion.parse(try item.bytes())
            #expect(parsed.authenticatorData.flags & AuthenticatorData.flagAttestedData != 0)
            #expect(parsed.authenticatorData.attestedCredential == nil)
            #expect(parsed.authenticatorData.raw.count == 37)
        }
    }
}
