import Foundation

struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum Subprocess {
    /// Runs an executable to completion, capturing both streams.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes to EOF before waiting so a full pipe cannot block the child.
        let group = DispatchGroup()
        nonisolated(unsafe) var errBytes = Data()
        group.enter()
        DispatchQueue.global().async {
            errBytes = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outBytes = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return ProcessResult(
            status: process.terminationStatus,
            stdout: String(decoding: outBytes, as: UTF8.self),
            stderr: String(decoding: errBytes, as: UTF8.self))
    }
}
