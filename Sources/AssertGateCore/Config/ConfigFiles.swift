#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Bounded reads of the files a config names (the config itself, secrets, PEMs).
enum ConfigFiles {
    static func read(_ path: String, limit: Int) -> Result<[UInt8], ValueParseError> {
        // O_NONBLOCK: opening a FIFO must not hang the loader; regular files ignore it.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return .failure(ValueParseError("cannot read '\(path)': \(errnoText())")) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(ValueParseError("cannot stat '\(path)': \(errnoText())")) }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            return .failure(ValueParseError("'\(path)' is not a regular file"))
        }
        var out = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc_read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(ValueParseError("cannot read '\(path)': \(errnoText())"))
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit {
                return .failure(ValueParseError("'\(path)' is larger than \(SizeParser.format(limit))"))
            }
        }
        return .success(out)
    }

    /// Resolves `path` against the config file's directory when relative.
    static func resolve(_ path: String, base: String?) -> String {
        guard !path.hasPrefix("/"), let base, !base.isEmpty else { return path }
        return base.hasSuffix("/") ? base + path : base + "/" + path
    }

    /// A PEM file that exists, is readable and holds at least one block whose
    /// label contains `label` (e.g. `CERTIFICATE`, `PRIVATE KEY`).
    static func checkPEM(_ path: String, label: String) -> ValueParseError? {
        switch read(path, limit: 1 << 20) {
        case .failure(let e): return e
        case .success(let bytes):
            let text = String(decoding: bytes, as: UTF8.self)
            var found = false
            for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) where line.hasPrefix("-----BEGIN ") {
                if line.contains(label) { found = true }
            }
            return found ? nil : ValueParseError("'\(path)' holds no PEM \(label)")
        }
    }

    static func errnoText() -> String {
        String(cString: strerror(errno))
    }
}

#if canImport(Glibc) || canImport(Musl)
private func Glibc_read(_ fd: Int32, _ buf: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buf, count)
}
#else
private func Glibc_read(_ fd: Int32, _ buf: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    Darwin.read(fd, buf, count)
}
#endif
