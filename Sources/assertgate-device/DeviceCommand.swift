import ArgumentParser
import Foundation

@main
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate-device",
        abstract: "Plays an App Attest app against a running AssertGate.",
        subcommands: [InitCACommand.self, AttestCommand.self, RequestCommand.self, LoadCommand.self])

    /// cli.md: exit 0 on success, 1 on a failed run, 2 on a usage error
    /// (ArgumentParser's own default for usage errors is 64).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)  // --help and friends
            } else if code == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            } else if error is ExitCode {
                exit(withError: error)
            } else {
                FileHandle.standardError.write(Data(("error: \(error)\n").utf8))
                Foundation.exit(1)
            }
        }
    }
}
