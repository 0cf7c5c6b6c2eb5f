import AppleMock
import ArgumentParser
import DeviceClient
import Foundation
import NIOPosix

struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "HTTP/2 load with a fresh assertion on every request; prints req/s and latency percentiles.",
        discussion: """
            Each of the C x S stream slots gets its own device key, attested once in a \
            setup phase, so a key never has two requests in flight and its counters \
            commit in order at the gateway.
            """)

    @OptionGroup var options: GatewayOptions

    @Option(help: "Request target (path and query), signed as is.")
    var path: String

    @Option(help: "HTTP method.")
    var method = "GET"

    @Option(help: "Request body sent with every request.")
    var body: String?

    @Option(help: "HTTP/2 connections.")
    var connections = 1

    @Option(help: "Concurrent streams per connection.")
    var streams = 8

    @Option(help: "Measured seconds (default 10 when --requests is not given).")
    var duration: Double?

    @Option(help: "Measured requests in total, instead of --duration.")
    var requests: Int?

    @Option(help: "Seconds of warm-up whose requests are not measured.")
    var warmup: Double = 0

    @Flag(help: "Send no assertion headers (measure the route in passthrough mode).")
    var passthrough = false

    @Option(help: "Attestations in flight at once during setup.")
    var attestConcurrency = 8

    @Option(help: "User id for the attested keys.")
    var userId: String?

    @Option(help: "Total requests per second: every stream slot keeps a fixed schedule, and latency counts from when a request was due (coordinated omission corrected); default: as fast as possible.")
    var rate: Double?

    @Option(help: "Client event-loop threads (default: one per core). 1 keeps the load tool on one core, e.g. next to a pinned gateway.")
    var threads: Int?

    @Flag(help: "With --rate: sign all assertions before the run (rate x time per slot), so the client does no ECDSA work while it measures.")
    var presign = false

    @Option(help: "Write every measured request as a TSV line: sent ms (when it was due, with --rate; after the warm-up), latency ms, connection.")
    var latencyLog: String?

    @Option(help: "PID of the gateway: report its CPU seconds over the measured window (Linux /proc).")
    var cpuPid: Int32?

    @Flag(help: "Send a fresh Apple-mock device token (as `device-token` makes, for `apple-mock`) on every request, for deviceCheck routes: the gateway spends a token on its first use. Stream slot S of connection C is device `<--device-prefix>-C-S`.")
    var deviceTokens = false

    @Option(help: "With --device-tokens: the header carrying the token (the gateway's attestation.headers.deviceToken).")
    var deviceTokenHeader = "AssertGate-Device-Token"

    @Option(help: "With --device-tokens: device names start with this.")
    var devicePrefix = "load"

    @Option(help: "With --device-tokens: MAC secret shared with apple-mock --device-secret (default: the mock's default).")
    var deviceSecret: String?

    @Flag(help: "Print the report as JSON.")
    var json = false

    func validate() throws {
        guard connections > 0, streams > 0 else { throw ValidationError("--connections and --streams must be > 0") }
        if duration != nil && requests != nil { throw ValidationError("--duration and --requests exclude each other") }
        if let requests, requests <= 0 { throw ValidationError("--requests must be > 0") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be > 0") }
        guard warmup >= 0 else { throw ValidationError("--warmup must be >= 0") }
        if let rate, !(rate > 0) { throw ValidationError("--rate must be > 0") }
        if let threads, threads <= 0 { throw ValidationError("--threads must be > 0") }
        if presign && rate == nil {
            throw ValidationError("--presign needs --rate: how many assertions to sign ahead follows from the rate")
        }
        if presign && passthrough { throw ValidationError("--presign and --passthrough exclude each other") }
        if !deviceTokens, deviceSecret != nil || devicePrefix != "load" || deviceTokenHeader != "AssertGate-Device-Token" {
            throw ValidationError("--device-secret, --device-prefix and --device-token-header need --device-tokens")
        }
        if deviceTokens {
            guard !deviceTokenHeader.isEmpty else { throw ValidationError("--device-token-header must not be empty") }
            // The longest name this run makes must be a valid mock device name.
            do {
                _ = try MockDeviceToken.make(device: "\(devicePrefix)-\(connections - 1)-\(streams - 1)")
            } catch {
                throw ValidationError("--device-prefix: \(error)")
            }
        }
    }

    func run() async throws {
        var load = LoadOptions(target: try options.gatewayURL())
        load.prefix = options.prefix
        load.method = method
        load.path = path
        load.body = Array((body ?? "").utf8)
        load.connections = connections
        load.streams = streams
        load.duration = duration ?? 10
        load.requests = requests
        load.warmup = warmup
        load.passthrough = passthrough
        load.attestConcurrency = attestConcurrency
        load.userId = userId
        load.rate = rate
        load.presign = presign
        load.recordSamples = latencyLog != nil
        load.cpuPid = cpuPid
        if deviceTokens {
            let secret = deviceSecret.map { Array($0.utf8) } ?? MockDeviceToken.defaultSecret
            let prefix = devicePrefix
            load.deviceTokens = LoadDeviceTokens(header: deviceTokenHeader) { slot, _ in
                try MockDeviceToken.make(device: "\(prefix)-\(slot.connection)-\(slot.stream)", secret: secret)
            }
        }
        let factory: AppAttestDeviceFactory? = passthrough
            ? nil
            : try DeviceCAs.loadOrCreate(directory: options.caDirectory)
                .factory(appId: options.appId, environment: options.environment)
        let group: MultiThreadedEventLoopGroup = threads.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) }
            ?? .singleton
        let generator = LoadGenerator(options: load, group: group, deviceFactory: factory)
        let report: LoadReport
        do {
            report = try await generator.run { message in
                FileHandle.standardError.write(Data((message + "\n").utf8))
            }
        } catch {
            if threads != nil { try? await group.shutdownGracefully() }
            throw error
        }
        if threads != nil { try await group.shutdownGracefully() }
        if let latencyLog {
            var text = "# measured window opened at CLOCK_MONOTONIC \(report.measuredFromMonotonicNanos) ns\n"
            text += "sent_ms\tlatency_ms\tconnection\n"
            for s in report.samples.sorted(by: { $0.sentMicros < $1.sentMicros }) {
                text += "\(Double(s.sentMicros) / 1000)\t\(Double(s.latencyMicros) / 1000)\t\(s.connection)\n"
            }
            try Data(text.utf8).write(to: URL(fileURLWithPath: latencyLog))
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print(report.text)
        }
        if report.successes == 0 { throw ExitCode(1) }
    }
}
