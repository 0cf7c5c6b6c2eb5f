import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A listener that could not be opened, named by its address: NIO's own
/// error says only `bind(descriptor:ptr:bytes:): Address already in use`.
public struct ListenerBindError: Error, CustomStringConvertible {
    public var address: HostPort
    public var underlying: any Error

    public init(address: HostPort, underlying: any Error) {
        self.address = address
        self.underlying = underlying
    }

    public var description: String {
        guard let io = underlying as? IOError else { return "cannot listen on \(address): \(underlying)" }
        switch io.errnoCode {
        case EADDRINUSE:
            return "cannot listen on \(address): the address is already in use (another process holds the port)"
        case EACCES:
            return "cannot listen on \(address): permission denied (ports below 1024 need privileges)"
        case EADDRNOTAVAIL:
            return "cannot listen on \(address): the address is not one of this machine's"
        default:
            return "cannot listen on \(address): \(io)"
        }
    }
}
