import ArgumentParser
import AssertGateCore

@main
struct AssertGateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate",
        abstract: "App Attest enforcing HTTP/2 reverse proxy.",
        subcommands: [VerifyAttestationCommand.self, VerifyAssertionCommand.self])
}
