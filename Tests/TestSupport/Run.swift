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
        // Output goes to files; the tool's stdin is `stdin` or /dev/null.
        let tag = UUID().uuidString
        let outPath = stdoutPath ?? NSTemporaryDirectory() + "assertgate-run-\(tag).out"
        let errPath = NSTemporaryDirectory() + "assertgate-run-\(tag).err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        defer {
            if stdoutPath == nil { try? FileManager.default.removeItem(atPath: outPath) }
            try? FileManager.default.removeItem(atPath: errPath)
        }
        // Not Foundation's Process: Swift 6.3.1's `Process.run` reads past the
        // end of a readdir buffer when it lists /proc/self/fd
        // (swift-corelibs-foundation #5472) and crashed a test run. Every
        // external client of the tests starts here, so it is spawned directly,
        // and its exit is awaited on a thread of its own (never one of the
        // cooperative pool's two, which an in-process gateway may need).
        let pid = try SpawnedProcess.spawn(
            executable: timeoutPath, arguments: ["-k", "5", String(Int(timeout)), path] + args,
            stdinDescriptor: stdin?.fileDescriptor, stdoutPath: outPath, stderrPath: errPath)
        let status = await SpawnedProcess.exitStatus(of: pid)
        return ProcessResult(
            status: status, stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}

public struct ToolMissing: Error, CustomStringConvertible {
    public var name: String
    public var description: String { "required tool \(name) is not installed" }
}
