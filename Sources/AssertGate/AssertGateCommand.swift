import ArgumentParser
import AssertGateCore

@main
struct AssertGateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate",
        abstract: "App Attest enforcing HTTP/2 reverse proxy.",
        subcommands: [ServeCommand.self, CheckConfigCommand.self, VerifyAttestationCommand.self, VerifyAssertionCommand.self])

    /// cli.md: exit 2 on a usage error (swift-argument-parser uses 64), 1 on a
    /// failed run, 0 on success and `--help`.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                writeStderr(fullMessage(for: error) + "\n")
                Self.exit(withError: ExitCode(2))
            }
            Self.exit(withError: error)
        }
    }
}
