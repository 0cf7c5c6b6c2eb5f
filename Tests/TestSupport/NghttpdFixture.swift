import Foundation

/// nghttp2's own HTTP/2 server (`nghttpd`, Debian's nghttp2-server) serving
/// a temporary docroot for one test, h2c (`--no-tls`, prior knowledge) or
/// TLS with ALPN h2 (TestPKI's certificate, for 127.0.0.1 and localhost).
/// It binds port 0 and the port is read from /proc (its listening socket),
/// so no port chosen here can be taken first; ready once it listens.
/// `trailers` are added to every response that has a body (`--trailer`).
public final class NghttpdFixture: @unchecked Sendable {
    public static let binary = "/usr/sbin/nghttpd"

    /// The files served under `/files/`: a short text and about 1 MiB of
    /// bytes that are not all alike (a truncated or reordered copy differs).
    public static let standardFiles: [String: [UInt8]] = [
        "files/hello.txt": Array("hello from nghttpd\n".utf8),
        "files/big.bin": (0..<(1 << 20) + 123).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) },
    ]

    public static let standardTrailers = [("x-test-trailer", "from-nghttpd"), ("x-test-checksum", "abc123")]

    public let port: Int
    public let docroot: String
    public let tls: Bool
    public let files: [String: [UInt8]]
    private let process: SpawnedProcess

    public init(
        tls pki: TestPKI? = nil, files: [String: [UInt8]] = NghttpdFixture.standardFiles,
        trailers: [(String, String)] = NghttpdFixture.standardTrailers, maxConcurrentStreams: Int? = nil
    ) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw SpawnedProcess.Failure(description: "\(Self.binary) is missing: apt-get install nghttp2-server")
        }
        docroot = NSTemporaryDirectory() + "assertgate-nghttpd-\(UUID().uuidString)"
        for (path, bytes) in files {
            let url = URL(fileURLWithPath: docroot).appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        self.files = files
        self.tls = pki != nil
        var arguments = ["--address=127.0.0.1", "--htdocs=" + docroot]
        for (name, value) in trailers { arguments.append("--trailer=\(name): \(value)") }
        if let maxConcurrentStreams { arguments.append("--max-concurrent-streams=\(maxConcurrentStreams)") }
        if let pki {
            arguments += ["0", pki.serverKey, pki.serverCertificate]
        } else {
            arguments += ["--no-tls", "0"]
        }
        let process = try SpawnedProcess(executable: Self.binary, arguments: arguments)
        self.process = process
        do {
            port = try process.wait(for: "a listening socket") { process.listeningPorts().first }
        } catch {
            process.stop()
            try? FileManager.default.removeItem(atPath: docroot)
            throw error
        }
    }

    deinit { stop() }

    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(atPath: docroot)
    }

    public var baseURL: String { "\(tls ? "https" : "http")://127.0.0.1:\(port)" }
}

/// One exchange as `nghttp -nv` (nghttp2's client) printed it: the response
/// head, the trailers (header fields received after DATA), the DATA bytes
/// counted and any RST_STREAM, of the request's stream. `nghttp -v` prints
/// each received field as `recv (stream_id=N) name: value` before the
/// `recv HEADERS frame` line that carried it.
public struct NghttpExchange: Sendable {
    public var status: Int?
    public var headers: [(String, String)] = []
    public var trailers: [(String, String)] = []
    public var dataBytes = 0
    public var resetCode: String?
    public var raw: String

    public init(parsing output: String) {
        raw = output
        var pending: [(String, String)] = []
        var seenData = false
        var stream: String?
        for line in output.split(separator: "\n") {
            let text = line.drop { $0 == "[" || $0 == " " || $0 == "." || $0.isNumber || $0 == "]" }
            if text.hasPrefix("recv (stream_id=") {
                // "(stream_id=13)", or "(stream_id=13, sensitive)" for a never-indexed field.
                guard let close = text.firstIndex(of: ")") else { continue }
                let id = String(text.dropFirst("recv (stream_id=".count).prefix { $0.isNumber })
                if stream == nil { stream = id }
                guard id == stream else { continue }
                let field = text[text.index(after: close)...].drop { $0 == " " }
                // ":status: 200" has its colon after the leading one.
                guard let colon = field.dropFirst().firstIndex(of: ":") else { continue }
                pending.append((String(field[..<colon]), field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            } else if text.hasPrefix("recv HEADERS frame") {
                if seenData || status != nil && !headers.isEmpty {
                    trailers += pending
                } else {
                    headers += pending
                    status = headers.first { $0.0 == ":status" }.flatMap { Int($0.1) }
                }
                pending = []
            } else if text.hasPrefix("recv DATA frame <length=") {
                seenData = true
                let n = text.dropFirst("recv DATA frame <length=".count).prefix { $0.isNumber }
                dataBytes += Int(n) ?? 0
            } else if text.hasPrefix("recv RST_STREAM frame") {
                resetCode = "?"
            } else if resetCode == "?", text.contains("error_code=") {
                resetCode = text.split(separator: "=").dropFirst().first.map { String($0.prefix { $0 != "(" && $0 != ")" }) }
            }
        }
    }

    public func header(_ name: String) -> String? { headers.first { $0.0 == name }?.1 }
    public func trailer(_ name: String) -> String? { trailers.first { $0.0 == name }?.1 }

    /// `nghttp -nv` with `arguments` (headers, `-d file`, ...) before the URL.
    public static func run(_ url: String, _ arguments: [String] = [], timeout: TimeInterval = 60) async throws -> (
        NghttpExchange, ProcessResult
    ) {
        let r = try await Run.tool("nghttp", ["-nv"] + arguments + [url], timeout: timeout)
        return (NghttpExchange(parsing: r.stdout), r)
    }
}
