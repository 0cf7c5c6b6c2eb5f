import ArgumentParser
import AssertGateCore
import CLISupport

@main
struct AssertGateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "assertgate",
        abstract: "App Attest enforcing HTTP/2 reverse proxy.",
        discussion: """
            Documentation, in the repository: README.md; docs/config.md (every configuration key), \
            docs/protocol.md (what apps send and upstreams receive, reason tokens), docs/cli.md (these commands), \
            docs/upstream.md (checking the trust headers), docs/redis.md (the store).
            """,
        subcommands: [ServeCommand.self, CheckConfigCommand.self, VerifyAttestationCommand.self, VerifyAssertionCommand.self])

    static func main() async { await mainWithCLIExitCodes() }
}
