import ArgumentParser
import AssertGateCore
import CLISupport

@main
struct AssertGateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate",
        abstract: "App Attest enforcing HTTP/2 reverse proxy.",
        subcommands: [ServeCommand.self, CheckConfigCommand.self, VerifyAttestationCommand.self, VerifyAssertionCommand.self])

    static func main() async { await mainWithCLIExitCodes() }
}
