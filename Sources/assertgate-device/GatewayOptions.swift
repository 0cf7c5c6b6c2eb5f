import ArgumentParser
import DeviceClient

/// Options every subcommand shares.
struct GatewayOptions: ParsableArguments {
    @Option(help: "Gateway base URL (cleartext; HTTP/2 with prior knowledge).")
    var gateway = "http://127.0.0.1:8080"

    @Option(help: "Prefix of the challenge and attest routes.")
    var prefix = "/assertgate/v1"

    @Option(help: "Directory holding the device key and its counter.")
    var state = "./.assertgate-device"

    @Option(help: "Directory of the test CAs (created when absent); default <state>/ca.")
    var trustAnchorDir: String?

    @Option(help: "App ID (TEAMID.bundle.id) the device attests for.")
    var appId = "ABCDE12345.com.example.app"

    @Option(help: "development or production (the AAGUID and receipt environment).")
    var environment: DeviceEnvironment = .development

    func gatewayURL() throws -> GatewayURL {
        do {
            return try GatewayURL(parsing: gateway)
        } catch {
            throw ValidationError("--gateway: \(error)")
        }
    }

    var caDirectory: String { trustAnchorDir ?? state + "/ca" }
}

enum DeviceEnvironment: String, ExpressibleByArgument, Codable, Sendable {
    case development, production
}
