import Foundation
import Testing
import Verifier

/// Every document of the 7 devicecheck-appattest YAML files verifies at its
/// recorded time (app-attest.md; vectors/devicecheck-appattest/README.md).
@Suite struct DeviceCheckVectorTests {
    static let allowed: [String: Set<AppAttestEnvironment>] = [DeviceCheckDocument.appId: [.development]]

    @Test(arguments: DeviceCheckDocument.files)
    func attestationsVerify(file: String) throws {
        let docs = try DeviceCheckDocument.load(file).filter { $0.type == "attestation" }
        #expect(docs.count == 1)
        for doc in docs {
            let pem = try #require(doc.string("publicKey"))
            let expectedKey = try P256PublicKey(pem: pem)
            let keyId = try Vectors.base64(try #require(doc.string("keyIdBase64")))
            let result = try AttestationVerifier().verify(
                attestationObject: try Vectors.base64(try #require(doc.string("attestationBase64"))),
                keyId: keyId, clientDataHash: Vectors.sha256(DeviceCheckDocument.clientData),
                allowedApps: Self.allowed, at: try Vectors.time(try #require(doc.string("timestamp"))))
            #expect(result.publicKey == expectedKey.point)
            #expect(result.keyId == keyId)
            #expect(result.appId == DeviceCheckDocument.appId)
            #expect(result.environment == .development)
            #expect(result.counter == 0)
            #expect(result.receipt.kind == .attest)
            #expect(result.receipt.environment == "sandbox")
            #expect(result.receipt.appId == DeviceCheckDocument.appId)
            #expect(result.extensions.isEmpty)
        }
    }

    @Test(arguments: DeviceCheckDocument.files)
    func assertionsVerify(file: String) throws {
        let docs = try DeviceCheckDocument.load(file).filter { $0.type == "assertion" }
        #expect(docs.count == 1)
        for doc in docs {
            let key = try P256PublicKey(pem: try #require(doc.string("publicKey")))
            let bytes = try Vectors.base64(try #require(doc.string("assertionBase64")))
            let result = try AssertionVerifier.verifyAssertion(
                bytes, publicKey: key, appId: DeviceCheckDocument.appId,
                clientDataHash: Vectors.sha256(DeviceCheckDocument.clientData), previousCounter: 0)
            let counter = try #require(doc.fields["counter"] as? Int)
            #expect(Int(result.counter) == counter)
            #expect(try ParsedAssertion.parse(bytes).authenticatorData.flags == 0x40)
        }
    }

    @Test(arguments: DeviceCheckDocument.files)
    func receiptsVerifyAtTheirCreationTime(file: String) throws {
        let docs = try DeviceCheckDocument.load(file).filter { $0.type == "receipt" }
        #expect(!docs.isEmpty)
        for doc in docs {
            let key = try P256PublicKey(pem: try #require(doc.string("publicKey")))
            let receipt = try ReceiptVerifier.verify(
                receipt: try Vectors.base64(try #require(doc.string("receiptBase64"))),
                appId: DeviceCheckDocument.appId, publicKey: key.point)
            let p = doc.properties
            #expect(Self.millis(receipt.creationTime) == Self.millis(p["creationTime"]))
            #expect(Self.millis(receipt.expirationTime) == Self.millis(p["expirationTime"]))
            #expect(Self.millis(receipt.notBefore) == Self.millis(p["notBefore"]))
            #expect(receipt.riskMetric == p["riskMetric"] as? Int)
            #expect(receipt.kind.rawValue == p["type"] as? String)
            #expect(receipt.environment == p["environment"] as? String)
            #expect(receipt.token == p["token"] as? String)
            let clientHash = try Vectors.base64(try #require(p["clientHashBase64"] as? String))
            #expect(receipt.clientHash == clientHash)
        }
    }

    /// YAML values are quoted strings or (unquoted) timestamps Yams turns into Dates.
    static func millis(_ value: Any?) -> Int64? {
        switch value {
        case let time as RFC3339Time: return time.unixSeconds * 1000 + Int64(time.nanoseconds / 1_000_000)
        case let text as String: return RFC3339Time(text).flatMap { millis($0) }
        case let date as Date: return Int64((date.timeIntervalSince1970 * 1000).rounded())
        default: return nil
        }
    }

    @Test func twentyReceiptsInTotal() throws {
        let count = try DeviceCheckDocument.files.reduce(0) {
            $0 + (try DeviceCheckDocument.load($1).filter { $0.type == "receipt" }.count)
        }
        #expect(count == 20)
    }
}
