import ArgumentParser
import AssertGateCore
import Dispatch
import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `assertgate serve --config FILE`: runs until SIGTERM/SIGINT (drain, exit 0);
/// SIGHUP reloads the file (an invalid one is logged and the old one stays).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Run the gateway. SIGHUP reloads, SIGTERM drains and exits 0.",
        discussion: "The configuration file is described key by key in docs/config.md; the command line in docs/cli.md.")

    @Option(name: .long, help: "The YAML configuration file (reference: docs/config.md).")
    var config: String

    @Option(name: .long, help: "Event-loop workers (default: one per core).")
    var workers: Int?

    @Option(name: .long, help: "Seconds to drain in-flight requests on SIGTERM.")
    var drainSeconds: Int = 30

    func validate() throws {
        if let workers, workers < 1 { throw ValidationError("--workers must be at least 1") }
        if drainSeconds < 0 { throw ValidationError("--drain-seconds must not be negative") }
    }

    func run() async throws {
        // Logging is configured from the file; until it is loaded, errors go to stderr.
        if let loaded = try? ConfigLoader.load(path: config) {
            LogBootstrap.bootstrap(loaded.logging)
        }
        let logger = Logger(label: "assertgate")
        // Signals are caught before the listeners open: a SIGHUP sent as soon as
        // /healthz answers must reload, not kill the process (the default action).
        // The stream keeps what arrives until the loop below reads it; a SIGTERM
        // during start (every step of which is time-bounded) is acted on after it.
        let signals = SignalEvents([SIGTERM, SIGINT, SIGHUP])
        let server: GatewayServer
        do {
            server = try await GatewayServer.start(configPath: config, workers: workers, logger: logger)
        } catch {
            signals.cancel()
            writeStderr("assertgate: \(error)\n")
            throw ExitCode(1)
        }
        logger.info(
            "assertgate serving",
            metadata: ["ports": "\(server.ports)", "admin": "\(server.adminPort)", "config": "\(config)"])

        for await signal in signals.stream {
            if signal == SIGHUP {
                _ = await server.reload()
                continue
            }
            await server.shutdown(drain: .seconds(Int64(drainSeconds)))
            break
        }
        signals.cancel()
    }
}

/// POSIX signals as an async stream, through Dispatch sources (the default
/// actions are disabled so the process is not killed before it can drain).
final class SignalEvents {
    let stream: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init(_ numbers: [Int32]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        let queue = DispatchQueue(label: "assertgate.signals")
        var sources: [any DispatchSourceSignal] = []
        for n in numbers {
            signal(n, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: n, queue: queue)
            source.setEventHandler { continuation.yield(n) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    func cancel() {
        for s in sources { s.cancel() }
    }
}
