import ArgumentParser
import AssertGateCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `assertgate check-config FILE`: 0 valid (resolved config on stdout),
/// 1 invalid (one `file:line: message` per error on stderr, or `file: message`
/// for a named file that does not load), 2 usage error.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a config file and print the resolved listeners, upstreams and routes.",
        discussion: "Every key, its default and what this command says about it: docs/config.md.")

    @Argument(help: "The YAML config file (reference: docs/config.md).")
    var file: String

    func run() throws {
        let config: GatewayConfig
        do {
            config = try ConfigLoader.load(path: file)
        } catch {
            for d in error.diagnostics {
                writeStderr(d.description + "\n")
            }
            throw ExitCode(1)
        }
        // The files it names must also load (keys match certificates, PEMs parse).
        let problems = ConfigMaterials.problems(config)
        guard problems.isEmpty else {
            for problem in problems { writeStderr("\(file): \(problem)\n") }
            throw ExitCode(1)
        }
        // As serve does first: the default limits.maxConnections printed is
        // then the one serve would use under the same limits.
        FileDescriptorLimit.raise()
        print(ConfigSummary.render(config), terminator: "")
        // risk.md §6.19: warnings on standard error, one per line.
        for warning in config.warnings { writeStderr("warning: \(warning)\n") }
        print("\(file): OK")
    }
}

func writeStderr(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.withUnsafeMutableBytes { buf in
        var offset = 0
        while offset < buf.count {
            let n = write(2, buf.baseAddress.map { $0 + offset }, buf.count - offset)
            if n <= 0 { return }
            offset += n
        }
    }
}
