import ArgumentParser
import Foundation

extension AsyncParsableCommand {
    /// Runs the command with docs/cli.md's exit codes, shared by every AssertGate
    /// executable: 0 on success and `--help`, 1 on a failed run, 2 on a usage
    /// error (ArgumentParser's own default for usage errors is 64).
    public static func mainWithCLIExitCodes() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
