import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where formatted log lines go. Each call receives one complete line
/// (newline included) so concurrent writers never interleave within a line.
public protocol LogSink: Sendable {
    func write(line: String)
}

/// A file descriptor (stderr by default); one `write(2)` per line under a lock.
public final class FileDescriptorLogSink: LogSink {
    private let fd: Int32
    private let lock = Mutex<Void>(())

    public init(fd: Int32) {
        self.fd = fd
    }

    public static let standardError = FileDescriptorLogSink(fd: 2)
    public static let standardOutput = FileDescriptorLogSink(fd: 1)

    public func write(line: String) {
        var bytes = Array(line.utf8)
        lock.withLock { _ in
            bytes.withUnsafeMutableBytes { buf in
                var offset = 0
                while offset < buf.count {
                    #if canImport(Darwin)
                    let n = Darwin.write(fd, buf.baseAddress.map { $0 + offset }, buf.count - offset)
                    #else
                    let n = Glibc.write(fd, buf.baseAddress.map { $0 + offset }, buf.count - offset)
                    #endif
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return }
                    offset += n
                }
            }
        }
    }
}

/// Collects lines in memory (tests).
public final class MemoryLogSink: LogSink {
    private let storage = Mutex<[String]>([])

    public init() {}

    public func write(line: String) {
        storage.withLock { $0.append(line) }
    }

    public var lines: [String] { storage.withLock { $0 } }
}
