import Foundation

/// Runs `h2_test_server.py` (python3-h2), or another script of Support/, on a free loopback port.
final class TestH2Server {
    let process = Process()
    /// Held open for the server's life: EOF on its stdin makes it exit.
    private let stdin = Pipe()
    let port: Int

    enum StartError: Error, CustomStringConvertible {
        case noPython
        case noPort(String)
        var description: String {
            switch self {
            case .noPython: "/usr/bin/python3 with python3-h2 is required (apt-get install python3-h2)"
            case .noPort(let output): "test server did not report a port; output: \(output)"
            }
        }
    }

    init(script name: String = "h2_test_server.py", arguments: [String] = []) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent(name).path
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
    func stop() {
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
    }

    deinit { stop() }
}
