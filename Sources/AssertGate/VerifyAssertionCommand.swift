import ArgumentParser
import Foundation
import Verifier

/// `assertgate verify-assertion`: offline verification of one assertion
/// (docs/cli.md). Prints one JSON object; exit 0 ok, 1 not ok, 2 usage error.
struct VerifyAssertionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-assertion",
        abstract: "Verify one App Attest assertion offline and print the verdict as JSON.",
        discussion: "Options and output are described in docs/cli.md; reason tokens in docs/protocol.md.")

    @Option(name: .customLong("assertion"), help: "File with the assertion object (base64 or raw CBOR).")
    var assertion: [String] = []
    @Option(name: .customLong("public-key"), help: "File with a PEM public key or the hex of the 65-byte point.")
    var publicKey: [String] = []
    @OptionGroup var common: OfflineClientDataOptions
    @Option(name: .customLong("previous-counter"), help: "The stored counter; the assertion's must be greater.")
    var previousCounter: [String] = []
    /// Unknown options land here so they are a usage error (exit 2) too.
    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    func run() throws {
        if let first = unrecognized.first { throw OfflineCLI.usage("unexpected argument '\(first)'") }
        let assertionPath = try OfflineCLI.single(assertion, "--assertion")
        let keyPath = try OfflineCLI.single(publicKey, "--public-key")
        let (app, clientDataHash) = try common.resolved()
        guard previousCounter.count <= 1 else { throw OfflineCLI.usage("--previous-counter given more than once") }
        var previous: UInt32?
        if let text = previousCounter.first {
            guard let value = UInt32(text) else { throw OfflineCLI.usage("--previous-counter must be 0 to 4294967295") }
            previous = value
        }
        let key = try Self.loadKey(keyPath)
        let bytes = try OfflineCLI.readObject(assertionPath)

        do {
            let result = try AssertionVerifier.verifyAssertion(
                bytes, publicKey: key, appId: app, clientDataHash: clientDataHash, previousCounter: previous)
            var json = JSONObject()
            json["ok"] = .bool(true)
            json["appId"] = .string(app)
            json["counter"] = .int(Int64(result.counter))
            json["publicKey"] = .string(Hex.encode(key.point))
            json["keyId"] = .string(Base64.encode(SHA256.hash(key.point)))
            json["extensions"] = OfflineCLI.json(result.extensions)
            print(json.serialized)
        } catch {
            // What the assertion says about itself, unverified: its counter and App ID hash
            // (not the key's id: that comes from --public-key, not from the assertion).
            let learned = (try? ParsedAssertion.parse(bytes)).map { parsed -> JSONValue in
                var out = JSONObject()
                out["counter"] = .int(Int64(parsed.counter))
                out["rpIdHash"] = .string(Hex.encode(parsed.authenticatorData.rpIdHash))
                return .object(out)
            }
            OfflineCLI.printFailure(error, learned: learned)
            throw ExitCode(1)
        }
    }

    /// PEM `PUBLIC KEY` or hex of the 65-byte point.
    static func loadKey(_ path: String) throws -> P256PublicKey {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 16 * 1024 else {
            throw OfflineCLI.usage("cannot read --public-key file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self)
        do {
            if text.contains("-----BEGIN") { return try P256PublicKey(pem: text) }
            let hex = text.filter { !$0.isWhitespace }
            guard let point = Hex.decode(hex) else {
                throw OfflineCLI.usage("--public-key is neither PEM nor the hex of a point")
            }
            return try P256PublicKey(point: point)
        } catch let error as P256PublicKey.ParseError {
            throw OfflineCLI.usage("--public-key: \(error)")
        }
    }
}

/// The options both offline commands share: the App ID and the client data.
/// Arrays, so that a repeated option is a usage error rather than "last wins".
struct OfflineClientDataOptions: ParsableArguments {
    @Option(name: .customLong("app-id"), help: "The App ID, TEAMID.bundle.id.")
    var appId: [String] = []
    @Option(name: .customLong("client-data-hash-hex"), help: "clientDataHash in hex (any length).")
    var clientDataHashHex: [String] = []
    @Option(name: .customLong("client-data"), help: "clientData; clientDataHash = SHA-256 of its UTF-8 bytes.")
    var clientData: [String] = []

    func resolved() throws -> (appId: String, clientDataHash: [UInt8]) {
        (try OfflineCLI.single(appId, "--app-id"), try OfflineCLI.clientDataHash(hex: clientDataHashHex, text: clientData))
    }
}
