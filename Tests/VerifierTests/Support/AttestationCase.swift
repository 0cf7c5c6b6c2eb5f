import Foundation
import Testing
import Verifier

/// One real attestation with everything needed to verify it.
struct AttestationCase: CustomTestStringConvertible, Sendable {
    let name: String
    let appId: String
    let environment: AppAttestEnvironment
    /// RFC 3339, inside the leaf's validity window.
    let time: String
    let keyIdBase64: String
    let clientDataHash: @Sendable () throws -> [UInt8]
    let attestation: @Sendable () throws -> [UInt8]

    var testDescription: String { name }

    func verify(
        appId: String? = nil, allowed: Set<AppAttestEnvironment>? = nil, keyId: [UInt8]? = nil,
        clientDataHash: [UInt8]? = nil, at time: Int64? = nil, verifier: AttestationVerifier = AttestationVerifier()
    ) throws -> VerifiedAttestation {
        let bytes = try attestation()
        let keyId = try keyId ?? Vectors.base64(keyIdBase64)
        let hash = try clientDataHash ?? self.clientDataHash()
        let at = try time ?? Vectors.time(self.time)
        return try verifier.verify(
            attestationObject: bytes, keyId: keyId, clientDataHash: hash,
            allowedApps: [appId ?? self.appId: allowed ?? [environment]], at: at)
    }

    static func worldcoin() throws -> [AttestationCase] {
        guard let manifest = try Vectors.json("attestation-gateway-worldcoin/manifest.json") as? [[String: Any]] else {
            return []
        }
        return manifest.compactMap { entry -> AttestationCase? in
            guard entry["type"] as? String == "attestation", let file = entry["file"] as? String,
                let appId = entry["appId"] as? String, let clientData = entry["clientData_utf8"] as? String,
                let keyId = entry["keyId_b64"] as? String, let notBefore = entry["credCert_notBefore"] as? String
            else { return nil }
            // "2023-06-08 15:18:03+00:00" → one hour after the leaf's notBefore.
            let start = String(notBefore.prefix(19)).replacingOccurrences(of: " ", with: "T")
            let hour = Int(start.dropFirst(11).prefix(2)) ?? 0
            let time = start.prefix(11) + String(format: "%02d", (hour + 1) % 24) + start.dropFirst(13) + "Z"
            let safeTime = hour == 23 ? start + "Z" : String(time)
            return AttestationCase(
                name: "worldcoin/\(file)", appId: appId, environment: .development, time: safeTime,
                keyIdBase64: keyId, clientDataHash: { Vectors.sha256(clientData) },
                attestation: { try Vectors.base64(Vectors.text("attestation-gateway-worldcoin/\(file)")) })
        }
    }

    static let apple2026 = AttestationCase(
        name: "apple-2026-sample", appId: "1234567890.com.example.myapp", environment: .production,
        time: "2026-04-21T12:00:00Z", keyIdBase64: "zgSY9YSD+7TaDXssY6WlOPVS1K3Lmk+pFhlcSWE+ZV0=",
        clientDataHash: { Array("example_server_challenge".utf8) },
        attestation: {
            try Vectors.base64(
                Vectors.text("apple-attestation-object-validation-guide/apple_2026_sample_attestation.b64"))
        })

    static let apple2024 = AttestationCase(
        name: "apple-2024-sample", appId: "0352187391.com.apple.example_app_attest", environment: .production,
        time: "2024-04-18T12:00:00Z", keyIdBase64: "bSrEhF8TIzIvWSPwvZ0i2+UOBre4ASH84rK15m6emNY=",
        clientDataHash: { Array("test_server_challenge".utf8) },
        attestation: { try Vectors.data("apple-attestation-object-validation-guide/apple_2024_sample_attestation.cbor") })

    static let splitsecureProd = AttestationCase(
        name: "splitsecure-prod-2024-sample", appId: "0352187391.com.apple.example_app_attest",
        environment: .production, time: "2024-04-18T00:00:00Z",
        keyIdBase64: "bSrEhF8TIzIvWSPwvZ0i2+UOBre4ASH84rK15m6emNY=",
        clientDataHash: { Array("test_server_challenge".utf8) },
        attestation: {
            try Vectors.base64(Vectors.text("go-app-attest-splitsecure/prod_apple_doc_sample_2024_attestation.b64"))
        })

    static let splitsecureDev = AttestationCase(
        name: "splitsecure-dev-turtlecrypt", appId: "NFVU6DQWLM.com.turtlecrypt.appattestfun",
        environment: .development, time: "2025-04-05T00:00:00Z",
        keyIdBase64: "B3hMn1CG/4of7s+TUkKLrS/6FAxsGft2N6PJhrzXI4E=",
        clientDataHash: { Vectors.sha256("server_challenge") },
        attestation: { try Vectors.base64(Vectors.text("go-app-attest-splitsecure/dev_turtlecrypt_attestation.b64")) })

    static let basD = AttestationCase(
        name: "bas-d", appId: "35MFYY2JY5.co.chiff.attestation-test", environment: .development,
        time: "2021-04-14T09:55:20Z", keyIdBase64: "AcP/pnpoNVPIJYZOvmIvWzDvmxkFoQCE4Uu7Nk6WiAA=",
        clientDataHash: {
            let json = try Vectors.json("appattest-bas-d/attestation.json") as? [String: String] ?? [:]
            return SHA256.hash(try Vectors.base64(json["clientData"] ?? ""))
        },
        attestation: {
            let json = try Vectors.json("appattest-bas-d/attestation.json") as? [String: String] ?? [:]
            return try Vectors.base64(json["attestationObject"] ?? "")
        })

    static let srinivas = AttestationCase(
        name: "srinivas1729", appId: "979F6L8R8M.org.reactjs.native.example.RNClientAttest",
        environment: .development, time: "2024-06-01T00:00:00Z",
        keyIdBase64: "+7NWLawiwi1lyK6vxqHzUp1bXzMji/Ft89ztMqPW4H4=",
        clientDataHash: {
            SHA256.hash(try Vectors.hex("279e8603-7bb9-4c7a-8965-aa1f8d7c16ee".replacingOccurrences(of: "-", with: "")))
        },
        attestation: {
            let json = try Vectors.json("appattest-checker-node-srinivas1729/testData.json") as? [String: Any] ?? [:]
            return try Vectors.base64(json["ATTESTATION_BASE64"] as? String ?? "")
        })

    static func uebelack(_ environment: AppAttestEnvironment) -> AttestationCase {
        let file = "node-app-attest-uebelack/attestation-\(environment.rawValue).json"
        return AttestationCase(
            name: "uebelack-\(environment.rawValue)", appId: "V8H6LQ9448.io.uebelacker.AppAttestExample",
            environment: environment, time: "2024-06-01T00:00:00Z",
            keyIdBase64: environment == .production
                ? "SC86LZmoFbL/KxWfezr7ihgEdLHK8ZrDbTwMtAkBCbM=" : "s/134MbeEEZDZKCvOTf+jZgNhpoDwdXZ8cKfTym8FUg=",
            clientDataHash: {
                let json = try Vectors.json(file) as? [String: String] ?? [:]
                return SHA256.hash(try Vectors.base64(json["challenge"] ?? ""))
            },
            attestation: {
                let json = try Vectors.json(file) as? [String: String] ?? [:]
                return try Vectors.base64(json["attestation"] ?? "")
            })
    }

    static var fixed: [AttestationCase] {
        [apple2026, apple2024, splitsecureProd, splitsecureDev, basD, srinivas, uebelack(.production), uebelack(.development)]
    }
}
