import AppleMock
import ArgumentParser
import DeviceSim
import Foundation
import Verifier

/// `assertgate-device apple-mock`: Apple's DeviceCheck and App Attest data
/// servers, played on this machine for demos and tests (devicecheck.md "The
/// Apple mock").
struct AppleMockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple-mock",
        abstract: "Serve a stand-in for Apple's DeviceCheck and App Attest data endpoints over HTTPS.",
        discussion: """
            Endpoints: POST /v1/validate_device_token, /v1/query_two_bits, /v1/update_two_bits (JSON bodies as \
            Apple's; device tokens from `assertgate-device device-token`; bits kept per device in memory) and \
            POST /v1/attestationData (with --receipt-ca-dir). With --jwt-public-key, the Authorization JWT must be \
            ES256-signed by that key (else 400/401 as Apple answers).

            Control (same port, unless --no-control; no authentication):
              POST /mock/script?endpoint=E&answer=SPEC      the next request of E gets SPEC
              POST /mock/always?endpoint=E|all&answer=SPEC  every request of E gets SPEC
              POST /mock/latency?endpoint=E|all&ms=N        answers of E wait N ms
              POST /mock/reset                              forget scripts, answers, latency, bits, log
              GET  /mock/bits?device=NAME                   a device's bits
              GET  /mock/requests                           one line per request: endpoint status device
            E: validate_device_token, query_two_bits, update_two_bits, attestationData.
            SPEC: normal, stall, close, never-set[:TEXT] (200 plain text), NNN[:TEXT] (a status, e.g. 429, 503), \
            receipt:RISK, untrusted-receipt.
            """)

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0: any free port, printed at start).")
    var port = 0

    @Option(help: "PEM certificate the mock presents (the gateway's deviceCheck.caFile must trust its CA).")
    var cert: String

    @Option(help: "PEM private key of --cert.")
    var key: String

    @Option(help: "PEM public key of the DeviceCheck key (.p8's public half); without it JWTs are not checked.")
    var jwtPublicKey: String?

    @Option(help: "MAC secret of device tokens (default: the one device-token uses by default).")
    var deviceSecret: String?

    @Option(help: "Directory of the test receipt CA (init-ca) to serve /v1/attestationData.")
    var receiptCaDir: String?

    @Option(help: "Latency added to every answer, in milliseconds.")
    var latencyMs = 0

    @Option(help: "A standing answer, ENDPOINT=SPEC (repeatable), e.g. query_two_bits=never-set or update_two_bits=503.")
    var answer: [String] = []

    @Flag(help: "Do not serve the /mock/ control requests.")
    var noControl = false

    func run() async throws {
        var options = AppleMockOptions(certificatePath: cert, privateKeyPath: key)
        options.host = host
        options.port = port
        options.controlEndpoint = !noControl
        if let jwtPublicKey {
            options.jwtPublicKeyPEM = try String(contentsOfFile: jwtPublicKey, encoding: .utf8)
        }
        if let deviceSecret { options.deviceSecret = Array(deviceSecret.utf8) }
        if let dir = receiptCaDir {
            options.receipts = .init(
                signer: try ReceiptCA.load(directory: dir),
                anchors: try TrustAnchors(pemFiles: [dir + "/receipt-root.cert.pem"]))
        }
        var standing: [(AppleMockEndpoint, AppleMockAnswer)] = []
        for item in answer {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let endpoint = AppleMockEndpoint(rawValue: parts[0]),
                let answer = AppleMockAnswer(spec: parts[1])
            else { throw ValidationError("--answer: '\(item)' is not ENDPOINT=SPEC (see --help)") }
            standing.append((endpoint, answer))
        }
        guard latencyMs >= 0 else { throw ValidationError("--latency-ms: must be 0 or more") }
        let server = try await AppleMockServer(options)
        for (endpoint, answer) in standing { server.answerAlways(answer, for: endpoint) }
        if latencyMs > 0 { server.setLatency(.milliseconds(Int64(latencyMs))) }
        var banner = "apple-mock listening on https://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(server.port)\n"
        if jwtPublicKey == nil { banner += "apple-mock: JWTs are not checked (no --jwt-public-key)\n" }
        // Unbuffered, so a script reading the port sees it at once.
        FileHandle.standardOutput.write(Data(banner.utf8))
        // Serves until the process is stopped.
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
