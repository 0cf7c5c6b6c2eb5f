import Foundation

/// Runs an external tool (curl, nghttp, h2load, openssl, python) to completion,
/// bounded by `timeout`, shared by the test targets.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

public enum Run {
    public static func which(_ tool: String) -> String? {
        if tool.hasPrefix("/") { return FileManager.default.isExecutableFile(atPath: tool) ? tool : nil }
        for dir in ["/usr/bin", "/usr/local/bin", "/bin"] {
            let p = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }

    /// `stdoutPath`, when given, is where the tool's output is written as it
    /// runs (the caller may read it meanwhile, and removes it).
    public static func tool(
        _ name: String, _ args: [String], stdin: FileHandle? = nil, timeout: TimeInterval = 60, stdoutPath: String? = nil
    ) async throws -> ProcessResult {
        guard let path = which(name), let timeoutPath = which("timeout") else { throw ToolMissing(name: name) }
        // Output goes to files and the exit is awaited through the termination
        // handler: no thread of the (two-thread) cooperative pool ever blocks on
        // a child, so an in-process gateway that answers through Swift
        // concurrency (the admin listener) can always make progress.
        let tag = UUID().uuidString
        let outPath = stdoutPath ?? NSTemporaryDirectory() + "assertgate-run-\(tag).out"
        let errPath = NSTemporaryDirectory() + "assertgate-run-\(tag).err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            if stdoutPath == nil { try? FileManager.default.removeItem(atPath: outPath) }
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        defer {
            try? out.close()
            try? err.close()
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: timeoutPath)
        // `timeout` bounds every external client; SIGKILL 5 s after SIGTERM.
        p.arguments = ["-k", "5", String(Int(timeout)), path] + args
        p.standardOutput = out
        p.standardError = err
        p.standardInput = stdin ?? FileHandle(forReadingAtPath: "/dev/null")
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            p.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try p.run()
            } catch {
                p.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        return ProcessResult(
            status: status, stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}

public struct ToolMissing: Error, CustomStringConvertible {
    public var name: String
    public var description: String { "required tool \(name) is not installed" }
}
