import ArgumentParser
import AssertGateCore
import Foundation
import Verifier

/// `assertgate verify-attestation`: offline verification of one attestation
/// (docs/cli.md). Prints one JSON object; exit 0 ok, 1 not ok, 2 usage error.
struct VerifyAttestationCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-attestation",
        abstract: "Verify one App Attest attestation object offline and print the verdict as JSON.",
        discussion: "Options and output are described in docs/cli.md; reason tokens in docs/protocol.md.")

    // Options are arrays so a repeated option is a usage error, not "last wins".
    @Option(name: .customLong("attestation"), help: "File with the attestation object (base64 or raw CBOR).")
    var attestation: [String] = []
    @Option(name: .customLong("key-id"), help: "The key ID as the app sent it (base64, either alphabet).")
    var keyId: [String] = []
    @OptionGroup var common: OfflineClientDataOptions
    @Option(name: .customLong("at"), help: "Verification time, RFC 3339.")
    var at: [String] = []
    @Option(name: .customLong("trust-anchor"), help: "PEM file of trust anchors (repeatable); replaces the Apple roots.")
    var trustAnchor: [String] = []
    @Option(name: .customLong("clock-skew"), help: "Allowed clock skew in seconds (default 60).")
    var clockSkew: [String] = []
    /// Unknown options land here so they are a usage error (exit 2) too.
    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    func run() throws {
        if let first = unrecognized.first { throw OfflineCLI.usage("unexpected argument '\(first)'") }
        let attestationPath = try OfflineCLI.single(attestation, "--attestation")
        let keyIdText = try OfflineCLI.single(keyId, "--key-id")
        let (app, clientDataHash) = try common.resolved()
        let atText = try OfflineCLI.single(at, "--at")
        guard let time = RFC3339Time(atText) else { throw OfflineCLI.usage("--at is not an RFC 3339 time: \(atText)") }
        let skew = try OfflineCLI.clockSkew(clockSkew)
        let keyIdBytes: [UInt8]
        do {
            keyIdBytes = try Base64.decode(keyIdText, maxLength: 1024)
        } catch {
            throw OfflineCLI.usage("--key-id: \(error)")
        }
        var verifier = AttestationVerifier(clockSkewSeconds: skew)
        if !trustAnchor.isEmpty {
            let anchors: TrustAnchors
            do {
                anchors = try TrustAnchors(pemFiles: trustAnchor)
            } catch {
                throw OfflineCLI.usage("--trust-anchor: \(error)")
            }
            verifier = AttestationVerifier(anchors: anchors, receiptAnchors: anchors, clockSkewSeconds: skew)
        }
        let bytes = try OfflineCLI.readObject(attestationPath)

        do {
            let result = try verifier.verify(
                attestationObject: bytes, keyId: keyIdBytes, clientDataHash: clientDataHash,
                allowedApps: [app: Set(AppAttestEnvironment.allCases)], at: time.unixSeconds)
            var json = JSONObject()
            json["ok"] = .bool(true)
            json["appId"] = .string(result.appId)
            json["environment"] = .string(result.environment.rawValue)
            json["keyId"] = .string(Base64.encode(result.keyId))
            json["publicKey"] = .string(Hex.encode(result.publicKey))
            json["counter"] = .int(Int64(result.counter))
            json["extensions"] = OfflineCLI.json(result.extensions)
            json["aclBlob"] = result.aclBlob.map { .string(Hex.encode($0)) } ?? .null
            json["keyPolicy"] = result.keyPolicy.map { .string($0.rawValue) } ?? .null
            json["receipt"] = OfflineCLI.json(result.receipt)
            print(json.serialized)
        } catch {
            OfflineCLI.printFailure(error, learned: AttestationFacts.read(attestationObject: bytes).map(OfflineCLI.json))
            throw ExitCode(1)
        }
    }
}

/// Helpers shared by the two offline verification commands.
enum OfflineCLI {
    /// Prints a usage error and returns the exit-2 error to throw.
    static func usage(_ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("Error: \(message)\nSee 'assertgate <command> --help'.\n".utf8))
        return ExitCode(2)
    }

    static func single(_ values: [String], _ name: String) throws -> String {
        guard values.count <= 1 else { throw usage("\(name) given \(values.count) times") }
        guard let value = values.first else { throw usage("missing \(name)") }
        return value
    }

    static func clientDataHash(hex: [String], text: [String]) throws -> [UInt8] {
        guard hex.count + text.count == 1 else {
            throw usage("give exactly one of --client-data-hash-hex and --client-data, once")
        }
        if let text = text.first { return SHA256.hash(text) }
        guard let value = hex.first, let bytes = Hex.decode(value) else {
            throw usage("--client-data-hash-hex is not hex")
        }
        return bytes
    }

    static func clockSkew(_ values: [String]) throws -> Int64 {
        guard values.count <= 1 else { throw usage("--clock-skew given \(values.count) times") }
        guard let text = values.first else { return 60 }
        guard let value = Int64(text), value >= 0, value <= 86_400 * 365 else {
            throw usage("--clock-skew must be a number of seconds, 0 to 31536000")
        }
        return value
    }

    /// A file holding base64 (either alphabet, whitespace allowed) or raw CBOR.
    static func readObject(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw usage("cannot read \(path)")
        }
        guard data.count <= 256 * 1024 else { throw usage("\(path) is larger than 256 KiB") }
        let bytes = [UInt8](data)
        let text = bytes.filter { ![0x20, 0x09, 0x0a, 0x0d].contains($0) }
        if !text.isEmpty, let decoded = try? Base64.decode(text, maxLength: 256 * 1024) {
            return decoded
        }
        return bytes
    }

    /// `learned`: what the object says about itself, unverified (docs/cli.md: "plus
    /// what was learned"), under its own key so nobody mistakes it for a verdict.
    static func printFailure(_ error: VerificationError, learned: JSONValue? = nil) {
        var json = JSONObject()
        json["ok"] = .bool(false)
        json["reason"] = .string(error.reason.rawValue)
        json["detail"] = .string(error.detail)
        if let learned { json["unverified"] = learned }
        print(json.serialized)
    }

    static func json(_ facts: AttestationFacts) -> JSONValue {
        var out = JSONObject()
        out["environment"] = facts.environment.map { .string($0.rawValue) } ?? .null
        out["aaguid"] = facts.aaguidHex.map { .string($0) } ?? .null
        out["counter"] = .int(Int64(facts.counter))
        out["rpIdHash"] = .string(facts.rpIdHashHex)
        out["credentialId"] = facts.credentialId.map { .string($0) } ?? .null
        out["extensions"] = json(facts.extensions)
        out["certificates"] = .int(Int64(facts.certificateCount))
        out["receipt"] = .bool(facts.hasReceipt)
        return .object(out)
    }

    static func json(_ extensions: AuthenticatorExtensions) -> JSONValue {
        var json = JSONObject()
        json["bundleVersion"] = extensions.bundleVersion.map { .string($0) } ?? .null
        json["validationCategory"] = extensions.validationCategory.map { .string(Hex.encode($0)) } ?? .null
        // risk.md §1: the category as a number and its name; bad values are named, not fatal.
        json["launchCategory"] = extensions.launchCategory.map { .int(Int64($0)) } ?? .null
        json["launchCategoryName"] = extensions.launchCategory.map { .string(LaunchCategory.name($0)) } ?? .null
        json["malformed"] = .array(extensions.malformedKeys.map { .string($0) })
        json["raw"] = .string(Hex.encode(extensions.raw))
        return .object(json)
    }

    static func json(_ receipt: Receipt) -> JSONValue {
        var json = JSONObject()
        json["type"] = .string(receipt.kind.rawValue)
        json["appId"] = .string(receipt.appId)
        json["environment"] = receipt.environment.map { .string($0) } ?? .null
        json["creationTime"] = .string(receipt.creationTime.text)
        json["notBefore"] = receipt.notBefore.map { .string($0.text) } ?? .null
        json["expirationTime"] = receipt.expirationTime.map { .string($0.text) } ?? .null
        json["riskMetric"] = receipt.riskMetric.map { .int(Int64($0)) } ?? .null
        json["token"] = receipt.token.map { .string($0) } ?? .null
        json["clientHash"] = receipt.clientHash.map { .string(Hex.encode($0)) } ?? .null
        json["publicKey"] = .string(Hex.encode(receipt.attestedPublicKey))
        return .object(json)
    }
}

/// An insertion-ordered JSON object, so the output is stable and readable.
struct JSONObject {
    private(set) var entries: [(String, JSONValue)] = []

    subscript(key: String) -> JSONValue? {
        get { entries.first { $0.0 == key }?.1 }
        set {
            entries.removeAll { $0.0 == key }
            if let newValue { entries.append((key, newValue)) }
        }
    }

    var serialized: String { JSONValue.object(self).serialized }
}

indirect enum JSONValue {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null
    case object(JSONObject)
    case array([JSONValue])

    var serialized: String {
        switch self {
        case .string(let s): return Self.quote(s)
        case .int(let n): return String(n)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .object(let o):
            return "{" + o.entries.map { Self.quote($0.0) + ":" + $0.1.serialized }.joined(separator: ",") + "}"
        case .array(let items):
            return "[" + items.map(\.serialized).joined(separator: ",") + "]"
        }
    }

    static func quote(_ s: String) -> String { JSONText.quoted(s) }
}
