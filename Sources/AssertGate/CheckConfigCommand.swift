import ArgumentParser
import AssertGateCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `assertgate check-config FILE`: 0 valid (resolved config on stdout),
/// 1 invalid (one `file:line: message` per error on stderr), 2 usage error.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a config file and print the resolved listeners, upstreams and routes.")

    @Argument(help: "The YAML config file (config.md).")
    var file: String

    func run() throws {
        do {
            let config = try ConfigLoader.load(path: file)
            print(ConfigSummary.render(config), terminator: "")
            for warning in config.warnings { print("warning: \(warning)") }
            print("\(file): OK")
        } catch {
            for d in error.diagnostics {
                writeStderr(d.description + "\n")
            }
            throw ExitCode(1)
        }
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
