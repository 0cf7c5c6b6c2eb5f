import AssertGateTestSupport
import DeviceClient
import Foundation
import NIOCore
import NIOPosix
import Testing

private struct Echo: Decodable {
    let method: String
    let path: String
    let headers: [[String]]
    let bodyLength: Int
    let bodySha256: String
    let openOnArrival: Int
}

private struct Stats: Decodable {
    let connections: Int
    let requests: Int
    let maxConcurrent: Int
    let goaways: Int
}

@Suite("HTTP/2 client against a python3-h2 server", .serialized)
struct HTTP2ClientTests {
    let group = MultiThreadedEventLoopGroup.singleton

    private func request(_ method: String, _ path: String, port: Int, body: [UInt8] = [],
                         headers: [(name: String, value: String)] = []) -> HTTPClientRequest {
        HTTPClientRequest(method: method, path: path, authority: "127.0.0.1:\(port)", headers: headers, body: body)
    }

    private func stats(_ connection: HTTP2Connection, port: Int) async throws -> Stats {
        let response = try await connection.execute(request("GET", "/stats", port: port))
        return try JSONDecoder().decode(Stats.self, from: Data(response.body))
    }

    @Test func getAndPostWithBodies() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        let connection = try await HTTP2Connection.connect(host: "127.0.0.1", port: server.port, eventLoop: group.next()).get()

        let get = try await connection.execute(request("GET", "/a/b?q=1%202", port: server.port, headers: [("X-Custom", "v1")]))
        #expect(get.status == 200)
        #expect(get.header("X-ECHO") == "1")
        let getEcho = try JSONDecoder().decode(Echo.self, from: Data(get.body))
        #expect(getEcho.method == "GET")
        #expect(getEcho.path == "/a/b?q=1%202")
        #expect(getEcho.bodyLength == 0)
        #expect(getEcho.headers.contains(["x-custom", "v1"]))

        // 1 MiB + 3 bytes: several DATA frames, beyond the default 64 KiB window.
        let body = (0..<(1 << 20) + 3).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let post = try await connection.execute(request("POST", "/upload", port: server.port, body: body))
        let postEcho = try JSONDecoder().decode(Echo.self, from: Data(post.body))
        #expect(postEcho.method == "POST")
        #expect(postEcho.bodyLength == body.count)
        #expect(postEcho.bodySha256 == SHA256Digest.hex(body))

        let big = try await connection.execute(request("GET", "/big?size=300000", port: server.port))
        #expect(big.body.count == 300_000)
        #expect(big.body[299_999] == UInt8((299_999 * 7) % 251))

        let teapot = try await connection.execute(request("GET", "/x?status=418", port: server.port))
        #expect(teapot.status == 418)
        try await connection.close().get()
    }

    @Test func manyConcurrentStreamsOnOneConnection() async throws {
        let server = try TestH2Server(arguments: ["--max-streams", "200"])
        defer { server.stop() }
        let connection = try await HTTP2Connection.connect(host: "127.0.0.1", port: server.port, eventLoop: group.next()).get()
        let futures = (0..<150).map { i in
            connection.execute(request("GET", "/c/\(i)?delay=1000", port: server.port))
        }
        var paths = Set<String>()
        for future in futures {
            let response = try await future.get()
            paths.insert(try JSONDecoder().decode(Echo.self, from: Data(response.body)).path)
        }
        #expect(paths.count == 150)
        let s = try await stats(connection, port: server.port)
        #expect(s.connections == 1)
        // All were held 1 s by the server, so they were open together (1 s: a stall
        // of the client or the Python server while sending cannot spread them apart).
        #expect(s.maxConcurrent > 100)
        try await connection.close().get()
    }

    @Test func respectsServerMaxConcurrentStreams() async throws {
        let server = try TestH2Server(arguments: ["--max-streams", "5"])
        defer { server.stop() }
        let connection = try await HTTP2Connection.connect(host: "127.0.0.1", port: server.port, eventLoop: group.next()).get()
        #expect(try await connection.streamLimit().get() == 5)
        let futures = (0..<40).map { i in connection.execute(request("GET", "/m/\(i)?delay=20", port: server.port)) }
        for future in futures {
            #expect(try await future.get().status == 200)
        }
        let s = try await stats(connection, port: server.port)
        #expect(s.maxConcurrent == 5)
        #expect(try await connection.peakConcurrentStreams().get() == 5)
        try await connection.close().get()
    }

    @Test func goawayFailsStreamsAboveLastStreamIdAsRetryable() async throws {
        let server = try TestH2Server(arguments: ["--goaway-after", "4", "--goaway-answer", "2"])
        defer { server.stop() }
        let connection = try await HTTP2Connection.connect(host: "127.0.0.1", port: server.port, eventLoop: group.next()).get()
        let futures = (0..<4).map { _ in connection.execute(request("GET", "/goaway-test", port: server.port)) }
        var ok = 0
        var refused: [HTTP2ClientError] = []
        for future in futures {
            do {
                _ = try await future.get()
                ok += 1
            } catch let error as HTTP2ClientError {
                refused.append(error)
            }
        }
        #expect(ok == 2)
        #expect(refused == [.goaway(lastStreamId: 3, errorCode: 0), .goaway(lastStreamId: 3, errorCode: 0)])
        #expect(refused.allSatisfy { $0.isRetryable })
        // A request after the GOAWAY is not sent, and says so.
        do {
            _ = try await connection.execute(request("GET", "/late", port: server.port))
            Issue.record("a request after GOAWAY was answered")
        } catch let error as HTTP2ClientError {
            #expect(error == .goaway(lastStreamId: 3, errorCode: 0))
        }
        try await connection.channel.closeFuture.get()
    }

    @Test func clientRetriesRefusedStreamsOnANewConnection() async throws {
        let server = try TestH2Server(arguments: ["--goaway-after", "4", "--goaway-answer", "2"])
        defer { server.stop() }
        let client = HTTP2Client(target: GatewayURL(host: "127.0.0.1", port: server.port), eventLoop: group.next())
        let futures = (0..<4).map { i in client.execute(request("GET", "/goaway-test?i=\(i)", port: server.port)) }
        var paths: [String] = []
        for future in futures {
            let response = try await future.get()
            paths.append(try JSONDecoder().decode(Echo.self, from: Data(response.body)).path)
        }
        #expect(paths == (0..<4).map { "/goaway-test?i=\($0)" })
        #expect(try await client.connectionsOpened().get() == 2)
        try await client.shutdown().get()
    }

    @Test func streamResetAndOversizedResponsesFailOnlyTheirStream() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var configuration = HTTP2ClientConfiguration()
        configuration.maxResponseBodyBytes = 1000
        let connection = try await HTTP2Connection.connect(
            host: "127.0.0.1", port: server.port, eventLoop: group.next(), configuration: configuration).get()
        do {
            _ = try await connection.execute(request("GET", "/r?reset=2", port: server.port))
            Issue.record("a reset stream produced a response")
        } catch let error as HTTP2ClientError {
            #expect(error == .streamReset(errorCode: 2))
            #expect(!error.isRetryable)
        }
        do {
            _ = try await connection.execute(request("GET", "/big?size=5000", port: server.port))
            Issue.record("an oversized body was accepted")
        } catch let error as HTTP2ClientError {
            #expect(error == .responseTooLarge("body over 1000 bytes"))
        }
        // The connection itself is still fine.
        #expect(try await connection.execute(request("GET", "/ok", port: server.port)).status == 200)
        try await connection.close().get()
    }

    @Test func connectFailsClearlyWhenNothingListens() async throws {
        // Bound but not listening: connecting is refused, and nobody else can
        // take the port while the test runs.
        let dead = try ReservedPort()
        defer { withExtendedLifetime(dead) {} }
        let port = dead.port
        await #expect(throws: (any Error).self) {
            _ = try await HTTP2Connection.connect(host: "127.0.0.1", port: port, eventLoop: group.next()).get()
        }
    }
}
