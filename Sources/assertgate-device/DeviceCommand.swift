import ArgumentParser

@main
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate-device",
        abstract: "Plays an App Attest app against a running AssertGate.",
        subcommands: [AttestCommand.self, RequestCommand.self, LoadCommand.self])
}
