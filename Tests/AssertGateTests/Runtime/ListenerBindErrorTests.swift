import AssertGateTestSupport
import Foundation
import Logging
import Testing
@testable import AssertGateCore

/// A port another socket holds: `serve` must say which address it could not
/// open (NIO's own error names only the system call).
@Suite struct ListenerBindErrorTests {
    static func config(listener: Int, admin: Int) -> String {
        """
        listeners: [{address: 127.0.0.1:\(listener)}]
        admin: {address: 127.0.0.1:\(admin)}
        apps: [{appId: ABCDE12345.com.example.app}]
        store: {memory: {}}
        upstreams: {api: {endpoints: [http://127.0.0.1:9]}}
        routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]
        """
    }

    static func startError(_ yaml: String) async throws -> String? {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = try dir.write("gw.yaml", yaml)
        do {
            let server = try await GatewayServer.start(configPath: path, workers: 1, logger: Logger(label: "test"))
            await server.shutdown(drain: .zero)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func aTakenListenerPortIsNamed() async throws {
        let taken = try ReservedPort()
        let message = try await Self.startError(Self.config(listener: taken.port, admin: 0))
        #expect(message == "cannot listen on 127.0.0.1:\(taken.port): the address is already in use (another process holds the port)")
    }

    @Test func aTakenAdminPortIsNamed() async throws {
        let taken = try ReservedPort()
        let message = try await Self.startError(Self.config(listener: 0, admin: taken.port))
        #expect(
            message
                == "admin listener: cannot listen on 127.0.0.1:\(taken.port): the address is already in use (another process holds the port)")
    }
}
