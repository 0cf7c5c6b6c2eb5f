import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A loopback port bound but never listened on, for as long as this object
/// lives: connecting to it is refused, and no other process can take it in
/// the meantime (a port merely found free and released could be).
public final class ReservedPort: @unchecked Sendable {
    public let port: Int
    private let fd: Int32

    public init() throws {
        // CLOEXEC: servers the tests spawn must not inherit (and keep) the port.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RedisServerFixture.FixtureError.noFreePort }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard bound == 0, named == 0 else {
            close(fd)
            throw RedisServerFixture.FixtureError.noFreePort
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: addr.sin_port))
    }

    deinit { close(fd) }
}
