import Foundation
import Testing
import Verifier

/// Runs the built `assertgate` binary (next to the test bundle) on vectors.
@Suite struct OfflineCLITests {
    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any] ?? [:]
        }
    }

    static func binary() throws -> URL {
        var candidates: [URL] = []
        if let exe = Bundle.main.executableURL { candidates.append(exe.deletingLastPathComponent()) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent())
        for dir in candidates {
            let url = dir.appendingPathComponent("assertgate")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        let message = "assertgate binary not found next to the test bundle (looked in \(candidates.map(\.path))); run `swift build` first"
        Issue.record(Comment(rawValue: message))
        throw Vectors.Missing(description: message)
    }

    static func run(_ arguments: [String]) throws -> Run {
        let process = Process()
        process.executableURL = try binary()
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func temporaryFile(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("assertgate-cli-\(UUID().uuidString)")
        try Data(contents.utf8).write(to: url)
        return url.path
    }

    static let appId = "35RXKB6738.org.worldcoin.insight.staging"

    static func attestationArgs(at: String = "2024-09-01T00:00:00Z", appId: String = appId) throws -> [String] {
        [
            "verify-attestation", "--attestation", try Vectors.url("attestation-gateway-worldcoin/att_2024-08_ios17.5.1.b64").path,
            "--key-id", "OEQf1t214ajtjlmQ29xNeMtdWYOf4dUWDJQrQFqCJIw=", "--app-id", appId, "--client-data", "test",
            "--at", at,
        ]
    }

    static let spki2024 =
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEh4Bd1IrEnNal/KNplK6VVrByUq4jsVtVVxpMI/mezeQcluflXHikUxYe+xoB/fAL3VnEA5zJlLobpHcfn/4+7w=="

    static func assertionArgs(keyFile: String) throws -> [String] {
        [
            "verify-assertion", "--assertion", try Vectors.url("attestation-gateway-worldcoin/asr_key-2024-08_counter1.b64").path,
            "--public-key", keyFile, "--app-id", appId, "--client-data", "test",
        ]
    }

    @Test func attestationOk() throws {
        let result = try Self.run(try Self.attestationArgs())
        #expect(result.status == 0, "\(result.stderr)")
        let json = result.json
        #expect(json["ok"] as? Bool == true)
        #expect(json["environment"] as? String == "development")
        #expect(json["appId"] as? String == Self.appId)
        #expect(json["counter"] as? Int == 0)
        let key = try P256PublicKey(spki: Vectors.base64(Self.spki2024))
        #expect(json["publicKey"] as? String == Hex.encode(key.point))
        let receipt = try #require(json["receipt"] as? [String: Any])
        #expect(receipt["type"] as? String == "ATTEST")
        #expect(receipt["creationTime"] is String)
    }

    @Test func rawCBORAttestationWithRawChallengeHex() throws {
        let result = try Self.run([
            "verify-attestation", "--attestation",
            try Vectors.url("apple-attestation-object-validation-guide/apple_2024_sample_attestation.cbor").path,
            "--key-id", "bSrEhF8TIzIvWSPwvZ0i2+UOBre4ASH84rK15m6emNY=", "--app-id", "0352187391.com.apple.example_app_attest",
            "--client-data-hash-hex", Hex.encode(Array("test_server_challenge".utf8)), "--at", "2024-04-18T12:00:00Z",
        ])
        #expect(result.status == 0, "\(result.stdout)")
        #expect(result.json["environment"] as? String == "production")
    }

    /// risk.md §1 on Apple's 2026 sample: category 1 is `platform`, bundle
    /// version 1, an iOS key's policy is `other`.
    @Test func apple2026SampleSignals() throws {
        let result = try Self.run([
            "verify-attestation", "--attestation",
            try Vectors.url("apple-attestation-object-validation-guide/apple_2026_sample_attestation.b64").path,
            "--key-id", "zgSY9YSD+7TaDXssY6WlOPVS1K3Lmk+pFhlcSWE+ZV0=", "--app-id", "1234567890.com.example.myapp",
            "--client-data-hash-hex", Hex.encode(Array("example_server_challenge".utf8)), "--at", "2026-04-21T12:00:00Z",
        ])
        #expect(result.status == 0, "\(result.stdout)")
        #expect(result.json["keyPolicy"] as? String == "other")
        let extensions = try #require(result.json["extensions"] as? [String: Any])
        #expect(extensions["bundleVersion"] as? String == "1")
        #expect(extensions["launchCategory"] as? Int == 1)
        #expect(extensions["launchCategoryName"] as? String == "platform")
        #expect((extensions["malformed"] as? [Any])?.isEmpty == true)
    }

    @Test func attestationNegativeVerdicts() throws {
        let wrongApp = try Self.run(try Self.attestationArgs(appId: "35RXKB6738.org.worldcoin.insight"))
        #expect(wrongApp.status == 1)
        #expect(wrongApp.json["ok"] as? Bool == false)
        #expect(wrongApp.json["reason"] as? String == "app-id-mismatch")
        #expect(wrongApp.json["detail"] is String)
        // What the object says about itself, kept apart from the verdict (cli.md "what was learned").
        let learned = try #require(wrongApp.json["unverified"] as? [String: Any])
        #expect(learned["environment"] as? String == "development")
        #expect(learned["counter"] as? Int == 0)
        #expect(learned["certificates"] as? Int == 2)
        #expect(learned["receipt"] as? Bool == true)
        #expect((learned["rpIdHash"] as? String)?.count == 64)
        #expect(wrongApp.json["environment"] == nil, "unverified facts must not look like a verdict")
        // Bytes that do not decode teach nothing.
        let garbage = NSTemporaryDirectory() + "garbage-\(UUID().uuidString).b64"
        try "AAAA".write(toFile: garbage, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: garbage) }
        var garbageArgs = try Self.attestationArgs()
        if let i = garbageArgs.firstIndex(of: "--attestation") { garbageArgs[i + 1] = garbage }
        let undecodable = try Self.run(garbageArgs)
        #expect(undecodable.json["reason"] as? String == "malformed-attestation")
        #expect(undecodable.json["unverified"] == nil)

        let expired = try Self.run(try Self.attestationArgs(at: "2025-03-01T00:00:00Z"))
        #expect(expired.status == 1)
        #expect(expired.json["reason"] as? String == "cert-chain-invalid")

        let wrongAnchor = try Self.run(
            try Self.attestationArgs() + ["--trust-anchor", try Vectors.url("roots/Apple_Root_CA_G3.pem").path])
        #expect(wrongAnchor.status == 1)
        #expect(wrongAnchor.json["reason"] as? String == "cert-chain-invalid")

        let replacedAnchors = try Self.run(
            try Self.attestationArgs() + [
                "--trust-anchor", try Vectors.url("roots/Apple_App_Attestation_Root_CA.pem").path,
                "--trust-anchor", try Vectors.url("roots/Apple_Root_CA_G3.pem").path, "--clock-skew", "0",
            ])
        #expect(replacedAnchors.status == 0, "\(replacedAnchors.stdout)")
    }

    @Test func assertionOkAndReplay() throws {
        let pem = "-----BEGIN PUBLIC KEY-----\n\(Self.spki2024)\n-----END PUBLIC KEY-----\n"
        let keyFile = try Self.temporaryFile(pem)
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        let ok = try Self.run(try Self.assertionArgs(keyFile: keyFile) + ["--previous-counter", "0"])
        #expect(ok.status == 0, "\(ok.stdout) \(ok.stderr)")
        #expect(ok.json["ok"] as? Bool == true)
        #expect(ok.json["counter"] as? Int == 1)

        let replay = try Self.run(try Self.assertionArgs(keyFile: keyFile) + ["--previous-counter", "1"])
        #expect(replay.status == 1)
        #expect(replay.json["reason"] as? String == "counter-replay")
        let learned = try #require(replay.json["unverified"] as? [String: Any])
        #expect(learned["counter"] as? Int == 1)
        #expect((learned["rpIdHash"] as? String)?.count == 64)

        let hexKey = try Self.temporaryFile(Hex.encode(try P256PublicKey(pem: pem).point) + "\n")
        defer { try? FileManager.default.removeItem(atPath: hexKey) }
        let badPayload = try Self.run([
            "verify-assertion", "--assertion", try Vectors.url("attestation-gateway-worldcoin/asr_key-2024-08_counter1.b64").path,
            "--public-key", hexKey, "--app-id", Self.appId, "--client-data", "not_the_hash_i_expect",
        ])
        #expect(badPayload.status == 1)
        #expect(badPayload.json["reason"] as? String == "bad-signature")
    }

    @Test func usageErrorsExitTwo() throws {
        let base = try Self.attestationArgs()
        let missing = try Self.run(Array(base.prefix(5)))
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("missing"))
        let duplicate = try Self.run(base + ["--app-id", "X.y"])
        #expect(duplicate.status == 2)
        let both = try Self.run(base + ["--client-data-hash-hex", "00"])
        #expect(both.status == 2)
        let unknown = try Self.run(base + ["--bogus"])
        #expect(unknown.status == 2)
        let badTime = try Self.run(Array(base.dropLast()) + ["yesterday"])
        #expect(badTime.status == 2)
        #expect(badTime.stdout.isEmpty)
        let help = try Self.run(["verify-attestation", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--trust-anchor"))
        let assertionHelp = try Self.run(["verify-assertion", "--help"])
        #expect(assertionHelp.status == 0)
    }
}
