import NIOConcurrencyHelpers
import NIOCore

/// Admits client connections under two caps, before a byte is read or a TLS
/// handshake paid for: the process's total (`limits.maxConnections`) and each
/// client address's (`limits.maxConnectionsPerAddress`). A refused connection
/// is closed at once. Shared by every worker: one lock at accept, one at close.
final class ConnectionAdmission: Sendable {
    struct Limits: Sendable, Equatable {
        var total: Int
        /// nil: no cap per address.
        var perAddress: Int?
    }

    /// What `release` gives back: the address counted, if any.
    struct Ticket: Sendable {
        fileprivate let key: ClientAddressKey?
    }

    private struct State {
        var limits: Limits
        var open = 0
        var byAddress: [ClientAddressKey: Int] = [:]
    }

    private let state: NIOLockedValueBox<State>

    init(_ limits: Limits) {
        state = NIOLockedValueBox(State(limits: limits))
    }

    /// A reload's limits hold for the next accept; connections already open
    /// stay (a lower cap only stops new ones until enough have closed).
    func update(_ limits: Limits) {
        state.withLockedValue { $0.limits = limits }
    }

    var openConnections: Int { state.withLockedValue { $0.open } }

    func admit(_ address: SocketAddress?) -> Result<Ticket, ConnectionRefusal> {
        let key = address.flatMap(ClientAddressKey.init)
        return state.withLockedValue { s in
            guard s.open < s.limits.total else { return .failure(.total) }
            // Counted without a cap too: a reload that sets one then holds
            // the connections already open against it.
            if let key {
                let n = s.byAddress[key, default: 0]
                if let cap = s.limits.perAddress, n >= cap { return .failure(.perAddress) }
                s.byAddress[key] = n + 1
            }
            s.open += 1
            return .success(Ticket(key: key))
        }
    }

    func release(_ ticket: Ticket) {
        state.withLockedValue { s in
            s.open -= 1
            guard let key = ticket.key, let n = s.byAddress[key] else { return }
            if n <= 1 { s.byAddress.removeValue(forKey: key) } else { s.byAddress[key] = n - 1 }
        }
    }
}

extension ConnectionAdmission.Limits {
    init(_ limits: LimitsConfig) {
        self.init(total: limits.effectiveMaxConnections, perAddress: limits.maxConnectionsPerAddress)
    }
}

/// Why a client connection was closed as it was accepted
/// (`assertgate_connections_refused_total{reason}`).
public enum ConnectionRefusal: String, Sendable, CaseIterable, Error {
    /// `limits.maxConnections`: the process holds as many as it may.
    case total = "max-connections"
    /// `limits.maxConnectionsPerAddress`: this address (or /64) holds as many as it may.
    case perAddress = "max-connections-per-address"
}

/// Who a connection counts against: an IPv4 address, or the /64 an IPv6
/// address is in (one client, one subscriber line, usually holds a whole /64
/// and can pick any address in it). An IPv4-mapped IPv6 address (a dual-stack
/// listener's IPv4 client) counts as its IPv4 address.
enum ClientAddressKey: Hashable, Sendable {
    case v4(UInt32)
    case v6Prefix(UInt64)

    init?(_ address: SocketAddress) {
        switch address {
        case .v4(let a):
            self = .v4(UInt32(bigEndian: a.address.sin_addr.s_addr))
        case .v6(let a):
            var sin6 = a.address
            let bytes = withUnsafeBytes(of: &sin6.sin6_addr) { Array($0) }
            guard bytes.count == 16 else { return nil }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
                self = .v4(bytes[12..<16].reduce(0) { $0 << 8 | UInt32($1) })
            } else {
                self = .v6Prefix(bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) })
            }
        case .unixDomainSocket:
            return nil
        }
    }
}
