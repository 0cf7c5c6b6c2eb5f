import Foundation

/// A Python test server (a script that listens on a free loopback port,
/// prints "PORT n" and exits when its stdin closes), run for one test.
public final class PythonScriptServer {
    let process = Process()
    /// Held open for the server's life: EOF on its stdin makes it exit.
    private let stdin = Pipe()
    public let port: Int

    public enum StartError: Error, CustomStringConvertible {
        case noPython
        case noPort(String)
        public var description: String {
            switch self {
            case .noPython: "/usr/bin/python3 is required (and python3-h2 for the HTTP/2 scripts)"
            case .noPort(let output): "test server did not report a port; output: \(output)"
            }
        }
    }

    /// `scriptPath`: the script's absolute path.
    public init(scriptPath script: String, arguments: [String] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw StartError.noPython }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = stdin
        try process.run()
        // The server prints "PORT n" once it listens: wait for that line.
        var collected = Data()
        let deadline = Date().addingTimeInterval(15)
        var found: Int?
        while found == nil, Date() < deadline {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // EOF: the server died
            collected.append(chunk)
            let text = String(decoding: collected, as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }) {
                found = Int(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
            }
        }
        guard let found else {
            process.terminate()
            throw StartError.noPort(String(decoding: collected, as: UTF8.self))
        }
        port = found
    }

    /// Closing its stdin makes the server exit; no waitUntilExit, which can
    /// block forever inside an async test on Linux.
    public func stop() {
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
    }

    deinit { stop() }
}
