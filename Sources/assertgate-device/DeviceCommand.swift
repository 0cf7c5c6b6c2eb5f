import ArgumentParser
import CLISupport

@main
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate-device",
        abstract: "Plays an App Attest app against a running AssertGate.",
        subcommands: [InitCACommand.self, AttestCommand.self, RequestCommand.self, LoadCommand.self])

    static func main() async { await mainWithCLIExitCodes() }
}
