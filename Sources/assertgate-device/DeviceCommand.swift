import ArgumentParser
import CLISupport

@main
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate-device",
        abstract: "Plays an App Attest app against a running AssertGate, and Apple's servers for it.",
        subcommands: [
            InitCACommand.self, AttestCommand.self, RequestCommand.self, LoadCommand.self, AppleMockCommand.self,
            DeviceTokenCommand.self,
        ])

    static func main() async { await mainWithCLIExitCodes() }
}
