import NIOCore
import Testing

@testable import AssertGateCore

@Suite struct ConnectionAdmissionTests {
    static func address(_ ip: String) throws -> SocketAddress { try SocketAddress(ipAddress: ip, port: 40_000) }

    static func admitted(_ a: ConnectionAdmission, _ ip: String) throws -> ConnectionAdmission.Ticket? {
        if case .success(let t) = a.admit(try address(ip)) { return t }
        return nil
    }

    static func refusal(_ a: ConnectionAdmission, _ ip: String) throws -> ConnectionRefusal? {
        if case .failure(let r) = a.admit(try address(ip)) { return r }
        return nil
    }

    @Test func theTotalCapRefusesUntilAConnectionCloses() throws {
        let a = ConnectionAdmission(.init(total: 2, perAddress: nil))
        let first = try #require(try Self.admitted(a, "192.0.2.1"))
        #expect(try Self.admitted(a, "192.0.2.2") != nil)
        #expect(try Self.refusal(a, "192.0.2.3") == .total)
        #expect(a.openConnections == 2)
        a.release(first)
        #expect(try Self.admitted(a, "192.0.2.3") != nil)
        #expect(a.openConnections == 2)
    }

    @Test func thePerAddressCapHoldsEachAddressApart() throws {
        let a = ConnectionAdmission(.init(total: 100, perAddress: 2))
        let t1 = try #require(try Self.admitted(a, "192.0.2.1"))
        #expect(try Self.admitted(a, "192.0.2.1") != nil)
        #expect(try Self.refusal(a, "192.0.2.1") == .perAddress)
        #expect(try Self.admitted(a, "192.0.2.2") != nil)
        a.release(t1)
        #expect(try Self.admitted(a, "192.0.2.1") != nil)
        #expect(try Self.refusal(a, "192.0.2.1") == .perAddress)
    }

    /// A client picks any address in its /64; a dual-stack listener's IPv4
    /// client arrives as ::ffff:a.b.c.d and counts as that IPv4 address.
    @Test func ipv6CountsBySlash64AndMappedIPv4AsIPv4() throws {
        let a = ConnectionAdmission(.init(total: 100, perAddress: 1))
        #expect(try Self.admitted(a, "2001:db8:1:2::1") != nil)
        #expect(try Self.refusal(a, "2001:db8:1:2:ffff::9") == .perAddress)
        #expect(try Self.admitted(a, "2001:db8:1:3::1") != nil)
        #expect(try Self.admitted(a, "198.51.100.7") != nil)
        #expect(try Self.refusal(a, "::ffff:198.51.100.7") == .perAddress)
        #expect(try Self.admitted(a, "::ffff:198.51.100.8") != nil)
    }

    /// A reload's caps hold for the next accept, against connections counted
    /// before any cap was set.
    @Test func aReloadedCapCountsConnectionsAlreadyOpen() throws {
        let a = ConnectionAdmission(.init(total: 100, perAddress: nil))
        let tickets = try (0..<3).map { _ in try #require(try Self.admitted(a, "192.0.2.1")) }
        a.update(.init(total: 100, perAddress: 2))
        #expect(try Self.refusal(a, "192.0.2.1") == .perAddress)
        a.release(tickets[0])
        #expect(try Self.refusal(a, "192.0.2.1") == .perAddress)
        a.release(tickets[1])
        #expect(try Self.admitted(a, "192.0.2.1") != nil)
        a.update(.init(total: 2, perAddress: nil))
        #expect(try Self.refusal(a, "192.0.2.9") == .total)
    }

    /// `serve` raises its soft descriptor limit to the hard one (at most
    /// 2^20), and the default total is half the limit in force.
    @Test func serveRunsWithTheHardDescriptorLimit() {
        let now = FileDescriptorLimit.raise()
        #expect(now == FileDescriptorLimit.hard)
        #expect(FileDescriptorLimit.current == now)
        #expect(LimitsConfig().effectiveMaxConnections == max(64, now / 2))
    }
}
