import ArgumentParser
import DeviceClient
import Foundation
import NIOPosix

struct RequestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "request",
        abstract: "Sends one request signed with an assertion by the saved device.")

    @OptionGroup var options: GatewayOptions

    @Argument(help: "HTTP method, e.g. GET or POST.")
    var method: String

    @Argument(help: "Request target exactly as sent (path and query).")
    var path: String

    @Option(help: "Request body.")
    var body: String?

    @Option(help: "File whose bytes are the request body.")
    var bodyFile: String?

    @Option(name: .customLong("header"), help: "Extra header 'Name: value' (repeatable).")
    var headers: [String] = []

    @Flag(help: "Fetch an assert challenge first and send it.")
    var challenge = false

    @Flag(help: "Sign UNSIGNED-PAYLOAD instead of the body hash (routes with bindBody: false).")
    var unsignedPayload = false

    @Option(help: "Use this counter instead of the next stored one.")
    var counter: UInt32?

    @Flag(help: "Re-send the previous request and assertion unchanged (shows counter-replay).")
    var replay = false

    @Flag(help: "Send no assertion headers.")
    var noAssertion = false

    @Flag(name: .customLong("http1.1"), help: "Use HTTP/1.1 instead of HTTP/2.")
    var http1 = false

    @OptionGroup(title: "Signals in the assertion (the running app's; they win over the attestation's)")
    var signals: SignalOptions

    func validate() throws {
        if body != nil && bodyFile != nil { throw ValidationError("--body and --body-file exclude each other") }
        for header in headers where !header.contains(":") {
            throw ValidationError("--header must be 'Name: value', got '\(header)'")
        }
    }

    func run() async throws {
        let url = try options.gatewayURL()
        let group = MultiThreadedEventLoopGroup.singleton
        let h2 = HTTP2Client(target: url, eventLoop: group.next())
        defer { _ = h2.shutdown() }
        let requester: HTTPRequester = http1 ? HTTP1Client(target: url, group: group) : h2

        let store = DeviceStateStore(directory: options.state)
        var request: HTTPClientRequest

        if replay {
            let saved = try store.load()
            guard let last = saved.lastRequest else {
                throw ValidationError("no previous request in \(options.state) to replay")
            }
            request = HTTPClientRequest(
                method: last.method, path: last.path, authority: url.authority,
                headers: last.headers.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil },
                body: Base64Text.decode(last.body) ?? [])
        } else {
            let bodyBytes: [UInt8]
            if let bodyFile {
                bodyBytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: bodyFile)))
            } else {
                bodyBytes = Array((body ?? "").utf8)
            }
            request = HTTPClientRequest(method: method, path: path, authority: url.authority, body: bodyBytes)
            for header in headers {
                guard let colon = header.firstIndex(of: ":") else { continue }
                request.headers.append((
                    String(header[..<colon]).trimmingCharacters(in: .whitespaces),
                    String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
            }
            if !noAssertion {
                var saved = try store.load()
                let cas = try DeviceCAs.loadOrCreate(directory: options.caDirectory)
                let device = try cas.loadDevice(
                    path: store.keyPath, appId: saved.appId, environment: saved.environment,
                    assertionExtensions: try signals.extensions())
                var challengeValue: String?
                if challenge {
                    let api = GatewayAPI(requester: requester, authority: url.authority, prefix: options.prefix)
                    challengeValue = try await api.challenge(keyId: device.keyId, purpose: .assert)
                }
                let next = counter ?? (saved.counter &+ 1)
                request.headers += try AssertionSigner().headers(
                    device: device, counter: next, method: method, path: path, challenge: challengeValue,
                    bodyHash: unsignedPayload ? .unsignedPayload : .body(bodyBytes))
                saved.counter = max(saved.counter, next)
                saved.lastRequest = DeviceState.SentRequest(
                    method: method, path: path, headers: request.headers.map { [$0.name, $0.value] },
                    body: Base64Text.standard(bodyBytes))
                // Persist before sending: a counter once used must never be reused.
                try store.save(saved)
            }
        }
        let response = try await requester.send(request)
        print("HTTP \(response.status)")
        for (name, value) in response.headers { print("\(name): \(value)") }
        print("")
        print(response.bodyText)
        if !(200..<300).contains(response.status) { throw ExitCode(1) }
    }
}
