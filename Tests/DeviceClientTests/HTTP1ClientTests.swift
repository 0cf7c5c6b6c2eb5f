import DeviceClient
import Foundation
import NIOPosix
import Testing

private struct Echo1: Decodable {
    let method: String
    let path: String
    let bodyLength: Int
    let bodySha256: String
    let host: String?
    let custom: String?
}

@Suite("HTTP/1.1 client against Python's http.server")
struct HTTP1ClientTests {
    @Test func getAndPost() async throws {
        let server = try TestH2Server(script: "h1_test_server.py")
        defer { server.stop() }
        let url = GatewayURL(host: "127.0.0.1", port: server.port)
        let client = HTTP1Client(target: url, group: MultiThreadedEventLoopGroup.singleton)

        let get = try await client.send(HTTPClientRequest(
            method: "GET", path: "/a?b=1", authority: url.authority, headers: [("X-Custom", "v")]))
        #expect(get.status == 200)
        let getEcho = try JSONDecoder().decode(Echo1.self, from: Data(get.body))
        #expect(getEcho.path == "/a?b=1")
        #expect(getEcho.host == url.authority)
        #expect(getEcho.custom == "v")

        let body = Array(repeating: UInt8(ascii: "z"), count: 100_000)
        let post = try await client.send(HTTPClientRequest(method: "POST", path: "/p", authority: url.authority, body: body))
        #expect(post.status == 201)
        #expect(post.header("content-type") == "application/json")
        let postEcho = try JSONDecoder().decode(Echo1.self, from: Data(post.body))
        #expect(postEcho.bodyLength == body.count)
        #expect(postEcho.bodySha256 == SHA256Digest.hex(body))
    }
}
