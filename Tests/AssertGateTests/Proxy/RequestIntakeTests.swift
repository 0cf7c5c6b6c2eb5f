import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import AssertGateCore

/// One intake for both front ends: framing per wire, absolute-form targets
/// (HTTP/1.1 only), the authority, the request id, refused heads.
@Suite struct RequestIntakeTests {
    private func worker(_ configure: (inout GatewayConfig) -> Void = { _ in }) -> Worker {
        var c = GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [])
        configure(&c)
        return Worker(
            eventLoop: EmbeddedEventLoop(), snapshot: GatewaySnapshot(config: c), hooks: GatewayHooks(),
            logger: Logger(label: "t"))
    }

    private func headers(_ pairs: [(String, String)]) -> HTTPHeaders { HTTPHeaders(pairs) }

    @Test func framingFollowsEachWiresRules() {
        let f = RequestIntake.framing
        #expect(f("POST", headers([("Transfer-Encoding", "Chunked")]), .http1) == .chunked)
        // Not `chunked` alone: framed as none, which the HTTP/1.1 front end refuses.
        #expect(f("POST", headers([("Transfer-Encoding", "gzip, chunked")]), .http1) == .none)
        #expect(f("POST", headers([("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")]), .http1) == .none)
        #expect(f("POST", headers([("Content-Length", "0")]), .http1) == .empty)
        #expect(f("POST", headers([("Content-Length", "12")]), .http1) == .contentLength(12))
        #expect(f("GET", headers([]), .http1) == .none)
        #expect(f("POST", headers([("Content-Length", "-1")]), .http1) == .none)
        #expect(f("POST", headers([]), .http2(endStream: true)) == .empty)
        #expect(f("GET", headers([]), .http2(endStream: true)) == .none)
        #expect(f("PUT", headers([("content-length", "7")]), .http2(endStream: false)) == .contentLength(7))
        #expect(f("POST", headers([]), .http2(endStream: false)) == .chunked)
    }

    @Test func absoluteFormIsAnHTTP1TargetOnly() {
        let w = worker()
        let h1 = RequestIntake.accept(
            method: "GET", target: "http://api.example:8080/x?y", authority: nil, headers: headers([("Host", "other")]),
            wire: .http1, scheme: "http", clientAddress: "127.0.0.1", worker: w)
        #expect(h1.request.target == "/x?y")
        #expect(h1.request.authority == "api.example:8080")
        #expect(h1.request.headers["host"].isEmpty)
        let h2 = RequestIntake.accept(
            method: "GET", target: "/x", authority: nil, headers: headers([("host", "fallback.example")]),
            wire: .http2(endStream: true), scheme: "https", clientAddress: nil, worker: w)
        #expect(h2.request.authority == "fallback.example")
        #expect(h2.body.isEmpty)
    }

    @Test func anAuthorityOrTargetAnUpstreamWouldReadItsOwnWayIsRefused() {
        let w = worker()
        func refusal(_ target: String, authority: String?, _ fields: [(String, String)], _ wire: RequestIntake.Wire) -> String? {
            RequestIntake.accept(
                method: "GET", target: target, authority: authority, headers: headers(fields), wire: wire, scheme: "http",
                clientAddress: nil, worker: w
            ).refusal?.detail
        }
        #expect(refusal("/x", authority: nil, [("Host", "api.example:8080")], .http1) == nil)
        #expect(refusal("/x", authority: nil, [("Host", "api.example/x")], .http1) != nil)
        #expect(refusal("/x", authority: "user@api.example", [], .http2(endStream: true)) != nil)
        #expect(refusal("/x", authority: "a.example", [("host", "b.example")], .http2(endStream: true)) != nil)
        #expect(refusal("/x", authority: "A.example", [("host", "a.EXAMPLE")], .http2(endStream: true)) == nil)
        #expect(refusal("/x#f", authority: "a.example", [], .http2(endStream: true)) != nil)
        #expect(refusal("/x y", authority: nil, [("Host", "a")], .http1) != nil)
        // The Host an HTTP/1.1 request sent is its authority, as HTTP/2's is.
        let h1 = RequestIntake.accept(
            method: "GET", target: "/x", authority: nil, headers: headers([("Host", "api.example")]), wire: .http1,
            scheme: "http", clientAddress: nil, worker: w)
        #expect(h1.request.authority == "api.example")
    }

    @Test func theClientsRequestIdIsKeptWhenValidAndTrustHeadersNeverPass() {
        let w = worker()
        let a = RequestIntake.accept(
            method: "GET", target: "/", authority: "h",
            headers: headers([("X-Request-Id", "req-1"), ("X-AssertGate-Trust", "verified"), ("X_AssertGate_User", "a")]),
            wire: .http2(endStream: true), scheme: "http", clientAddress: nil, worker: w)
        #expect(a.request.requestId == "req-1")
        #expect(a.request.headers.count == 1)
        #expect(a.refusal == nil)
    }

    @Test func underscoreHeadersCanRefuseTheHead() {
        let w = worker { $0.limits.underscoresInHeaders = .reject }
        let a = RequestIntake.accept(
            method: "GET", target: "/", authority: nil, headers: headers([("My_Header", "x")]), wire: .http1,
            scheme: "http", clientAddress: nil, worker: w)
        #expect(a.refusal?.reason == .malformedRequest)
    }
}
