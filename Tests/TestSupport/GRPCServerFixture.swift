import Foundation

/// Where the gRPC fixtures live and which Python runs them: a venv with
/// grpcio and grpcio-tools made by `Tests/Fixtures/grpc/setup.sh` (`.ci/run`
/// runs it) at `.build/grpc-venv`, or the interpreter `ASSERTGATE_GRPC_PYTHON`
/// names. A missing environment fails the test that needs it, saying how to
/// make one: it is never a reason to skip.
public enum GRPCFixtures {
    /// `Tests/Fixtures/grpc` of this checkout.
    public static let directory: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/grpc").path

    static let repositoryRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    public struct EnvironmentMissing: Error, CustomStringConvertible {
        public let description: String
    }

    /// The interpreter of the gRPC venv (`environment`: this process's, or a test's stand-in).
    public static func python(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        let configured = environment["ASSERTGATE_GRPC_PYTHON"]
        let path = configured ?? repositoryRoot + "/.build/grpc-venv/bin/python"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw EnvironmentMissing(description: """
                the gRPC test environment is missing: no Python at \(path)\
                \(configured != nil ? " (from ASSERTGATE_GRPC_PYTHON)" : ""). \
                Create it with `Tests/Fixtures/grpc/setup.sh` (a venv at .build/grpc-venv with grpcio and \
                grpcio-tools; .ci/run does this), or point ASSERTGATE_GRPC_PYTHON at a Python that has them.
                """)
        }
        return path
    }

    public static var serverScript: String { directory + "/grpc_echo_server.py" }
    public static var clientScript: String { directory + "/grpc_client.py" }
}

/// `grpc_echo_server.py` for one test: grpcio's server (gRPC core's HTTP/2)
/// serving `assertgate.test.Echo` on a loopback port it chose itself (port 0,
/// reported on a "PORT n" line once it accepts calls: no port race, no
/// sleep). h2c unless `tls` is given.
public final class GRPCServerFixture: @unchecked Sendable {
    public let port: Int
    private let process: SpawnedProcess

    public struct TLS: Sendable {
        public var certificate: String
        public var privateKey: String
        /// The CA that signed `certificate`, for `stats()` (which dials the
        /// server as `localhost`).
        public var caCertificate: String
        public init(certificate: String, privateKey: String, caCertificate: String) {
            self.certificate = certificate
            self.privateKey = privateKey
            self.caCertificate = caCertificate
        }
    }

    private let tls: TLS?

    /// `maxConnectionAgeMs`: the server ends each connection with GOAWAY
    /// after about that long (gRPC's `grpc.max_connection_age_ms`), letting
    /// calls in flight finish within `graceMs`, then closes it.
    public init(tls: TLS? = nil, maxConnectionAgeMs: Int? = nil, graceMs: Int? = nil) throws {
        let python = try GRPCFixtures.python()
        var arguments = ["-u", GRPCFixtures.serverScript]
        if let tls { arguments += ["--tls", tls.certificate, tls.privateKey] }
        if let maxConnectionAgeMs { arguments += ["--max-connection-age-ms", String(maxConnectionAgeMs)] }
        if let graceMs { arguments += ["--max-connection-age-grace-ms", String(graceMs)] }
        // Generating the code (protoc) and importing grpc take about a second.
        process = try SpawnedProcess(executable: python, arguments: arguments)
        let line = try process.waitForLine(prefix: "PORT ", timeout: 30)
        guard let port = Int(line.trimmingCharacters(in: .whitespaces)), port > 0 else {
            process.stop()
            throw SpawnedProcess.Failure(description: "grpc_echo_server.py reported \"PORT \(line)\"")
        }
        self.port = port
        self.tls = tls
    }

    deinit { stop() }

    public var target: String { "127.0.0.1:\(port)" }
    public var pid: Int32 { process.pid }
    public var errors: String { process.errors }

    public func stop() { process.stop() }
    /// SIGSTOP: the server's sockets stay open and nothing answers, not
    /// even its own deadline handling.
    public func pause() { process.pause() }
    public func resume() { process.resume() }

    /// What the server has seen (asked directly, not through the gateway).
    public func stats() async throws -> GRPCClient.Stats {
        let tlsArguments = tls.map { ["--tls-ca", $0.caCertificate, "--server-name", "localhost"] } ?? []
        return try await GRPCClient.run(["stats", "--target", target] + tlsArguments, as: GRPCClient.Stats.self)
    }

    /// Polls the server's stats (an external process) until `condition`
    /// holds or `timeout` passes; returns the last stats seen.
    public func waitForStats(
        timeout: TimeInterval = 10, _ condition: (GRPCClient.Stats) -> Bool
    ) async throws -> GRPCClient.Stats {
        let deadline = Date().addingTimeInterval(timeout)
        var last = try await stats()
        while !condition(last), Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
            last = try await stats()
        }
        return last
    }
}

/// `grpc_client.py`, a grpcio client, run to completion: one JSON line per run.
public enum GRPCClient {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public struct Reply: Decodable, Sendable {
        public let text: String
        public let seq: Int
        public let seenMetadata: [String: String]
    }

    public struct Unary: Decodable, Sendable {
        public let code: String
        public let codeNumber: Int
        public let details: String
        public let initialMetadata: [String: String]
        public let trailingMetadata: [String: String]
        public let reply: Reply?
        public let elapsedMs: Int
    }

    public struct Chat: Decodable, Sendable {
        public let code: String
        public let codeNumber: Int
        public let details: String
        public let trailingMetadata: [String: String]
        public let sent: Int
        public let received: Int
        public let inOrder: Bool
        public let seenMetadata: [String: String]
        public let elapsedMs: Int
    }

    public struct Load: Decodable, Sendable {
        public let ok: Int
        public let failed: Int
        public let failedCodes: [String: Int]
        public let failedDetails: [String]
    }

    public struct Cancel: Decodable, Sendable {
        public let started: Bool
        public let clientCode: String?
        public let serverSawCancel: Bool
        public let serverCompleted: Bool
        public let msToServerCancel: Int
    }

    public struct Stats: Decodable, Sendable {
        public let sayCalls: Int
        public let chatMessages: Int
        public let failCalls: Int
        public let peers: [String]
        public let slowStarted: [String]
        public let slowCancelled: [String]
        public let slowCompleted: [String]
    }

    struct Body: Decodable {
        let message: String
    }

    /// Runs the client with `arguments` (mode first) and decodes its JSON line.
    public static func run<T: Decodable>(_ arguments: [String], as type: T.Type, timeout: TimeInterval = 60) async throws -> T {
        let python = try GRPCFixtures.python()
        let r = try await Run.tool(python, ["-u", GRPCFixtures.clientScript] + arguments, timeout: timeout)
        guard r.status == 0, let line = r.stdout.split(separator: "\n").last else {
            throw Failure(description: "grpc_client.py \(arguments.joined(separator: " ")) exited \(r.status): \(r.stderr.suffix(3000))")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(line.utf8))
        } catch {
            throw Failure(description: "grpc_client.py printed \(line): \(error)")
        }
    }

    /// `--metadata k=v` arguments.
    public static func metadata(_ pairs: [(String, String)]) -> [String] {
        pairs.flatMap { ["--metadata", "\($0.0.lowercased())=\($0.1)"] }
    }

    /// The serialized `EchoRequest(text, seq)`, as protobuf (in Python) writes it.
    public static func message(text: String, seq: Int) async throws -> [UInt8] {
        let body = try await run(["print-body", "--text", text, "--seq", String(seq)], as: Body.self)
        guard let bytes = hexBytes(body.message) else {
            throw Failure(description: "print-body printed \(body.message), not hex")
        }
        return bytes
    }

    /// A gRPC request body of one uncompressed message: flag 0, the length
    /// (4 bytes, big-endian), the message. What `bindBody: true` hashes.
    public static func frame(_ message: [UInt8]) -> [UInt8] {
        let n = UInt32(message.count)
        return [0, UInt8(n >> 24), UInt8((n >> 16) & 0xff), UInt8((n >> 8) & 0xff), UInt8(n & 0xff)] + message
    }

    static func hexBytes(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
