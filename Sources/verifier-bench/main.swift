import Foundation
import Verifier

// verifier-bench [--seconds N] [--vectors DIR] [--no-openssl]
//
// Assertion verifications per second on one core: a real assertion
// (devicecheck ios-14.4) verified repeatedly with one cached P256PublicKey,
// compared with `openssl speed -seconds 5 ecdsap256` (raw verify/s).

struct Options {
    var seconds = 5.0
    var vectors: String?
    var runOpenSSL = true
}

func parseOptions() -> Options {
    var options = Options()
    var args = CommandLine.arguments.dropFirst()
    while let arg = args.popFirst() {
        switch arg {
        case "--seconds":
            guard let value = args.popFirst().flatMap(Double.init), value > 0 else { usage() }
            options.seconds = value
        case "--vectors":
            guard let value = args.popFirst() else { usage() }
            options.vectors = value
        case "--no-openssl": options.runOpenSSL = false
        case "--help", "-h":
            print(usageText)
            exit(0)
        default: usage()
        }
    }
    return options
}

let usageText = "usage: verifier-bench [--seconds N] [--vectors DIR] [--no-openssl]"

func usage() -> Never {
    FileHandle.standardError.write(Data((usageText + "\n").utf8))
    exit(2)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("verifier-bench: \(message)\n".utf8))
    exit(1)
}

func vectorsDirectory(_ given: String?) -> String {
    if let given { return given }
    if let env = ProcessInfo.processInfo.environment["ASSERTGATE_VECTORS"], !env.isEmpty { return env }
    // <root>/Sources/verifier-bench/main.swift → <root>/Tests/Vectors
    return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Vectors").path
}

/// The assertion document of devicecheck-appattest/ios-14.4.yaml, read with
/// a minimal line scan (plain `key: value` lines and the `publicKey: |` block).
func loadAssertion(_ directory: String) -> (assertion: [UInt8], key: String) {
    let path = directory + "/devicecheck-appattest/ios-14.4.yaml"
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fail("cannot read \(path)") }
    for document in text.components(separatedBy: "\n---") where document.contains("\ntype: assertion") {
        var assertion: String?
        var pem: [String] = []
        var inKey = false
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if inKey {
                if line.hasPrefix("  ") { pem.append(line.trimmingCharacters(in: .whitespaces)); continue }
                inKey = false
            }
            if line.hasPrefix("assertionBase64: ") { assertion = String(line.dropFirst("assertionBase64: ".count)) }
            if line.hasPrefix("publicKey: |") { inKey = true }
        }
        guard let assertion, let bytes = try? Base64.decode(assertion), !pem.isEmpty else { break }
        return (bytes, pem.joined(separator: "\n") + "\n")
    }
    fail("no assertion document in \(path)")
}

func measure(seconds: Double, _ body: () -> Bool) -> (count: Int, perSecond: Double) {
    let clock = ContinuousClock()
    let start = clock.now
    let limit = Duration.milliseconds(Int64(seconds * 1000))
    var count = 0
    while true {
        // Check the clock every 256 iterations so timing overhead stays negligible.
        for _ in 0..<256 {
            guard body() else { fail("verification failed during the benchmark") }
        }
        count += 256
        let elapsed = clock.now - start
        if elapsed >= limit {
            let s = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return (count, Double(count) / s)
        }
    }
}

/// `openssl speed -seconds 5 ecdsap256` → verify/s (last column of the result line).
func opensslVerifyPerSecond() -> Double? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl", "speed", "-seconds", "5", "ecdsap256"]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return nil }
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard let line = text.split(separator: "\n").last(where: { $0.contains("nistp256") }) else { return nil }
    return line.split(separator: " ").last.flatMap { Double($0) }
}

let options = parseOptions()
let (assertionBytes, pem) = loadAssertion(vectorsDirectory(options.vectors))
let appId = "6MURL8TA57.de.vincent-haupert.apple-appattest-poc"
let clientDataHash = SHA256.hash(Array("wurzelpfropf".utf8))
let key: P256PublicKey
do { key = try P256PublicKey(pem: pem) } catch { fail("public key: \(error)") }

// Sanity check before timing.
do {
    _ = try AssertionVerifier.verifyAssertion(
        assertionBytes, publicKey: key, appId: appId, clientDataHash: clientDataHash, previousCounter: 0)
} catch {
    fail("the vector assertion does not verify: \(error)")
}

func assertionRound() -> (count: Int, perSecond: Double) {
    measure(seconds: options.seconds) {
        (try? AssertionVerifier.verifyAssertion(
            assertionBytes, publicKey: key, appId: appId, clientDataHash: clientDataHash, previousCounter: 0)) != nil
    }
}

let parsedOnce: ParsedAssertion
do { parsedOnce = try ParsedAssertion.parse(assertionBytes) } catch { fail("\(error)") }
let digest = SHA256.hash(SHA256.hash(parsedOnce.authenticatorData.raw, clientDataHash))

// The machine may be shared: measure before and after OpenSSL and use the mean.
let before = assertionRound()
print(String(format: "assertion verify (parse + SHA-256s + ECDSA, cached key): %.0f/s  (%d in %.1f s)",
             before.perSecond, before.count, options.seconds))
let raw = measure(seconds: 1) { key.verify(signature: parsedOnce.signature, digest: digest) }
print(String(format: "P256PublicKey.verify(digest) alone: %.0f/s", raw.perSecond))

if options.runOpenSSL {
    guard let openssl = opensslVerifyPerSecond() else { fail("could not run `openssl speed -seconds 5 ecdsap256`") }
    print(String(format: "openssl speed -seconds 5 ecdsap256: %.0f verify/s", openssl))
    let after = assertionRound()
    print(String(format: "assertion verify again: %.0f/s", after.perSecond))
    let mean = (before.perSecond + after.perSecond) / 2
    print(String(format: "ratio (mean assertion verify/s ÷ openssl verify/s): %.3f", mean / openssl))
}
