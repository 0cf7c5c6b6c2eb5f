import AssertGateTestSupport
import Foundation
import Testing

extension Integration {
    /// Issue #19 with nghttp2's own server as the upstream: `h2c://` and
    /// `h2://` endpoints, a 1 MiB file byte for byte, and the trailers
    /// nghttpd adds (`--trailer`) reaching an HTTP/2 client (nghttp -v).
    @Suite(.serialized) struct NghttpdUpstreamTests {
        @Test(arguments: [false, true])
        func filesAndTrailersComeThroughTheGateway(tls: Bool) async throws {
            let pki = try await TestPKI.shared.value
            let nghttpd = try NghttpdFixture(tls: tls ? pki : nil)
            defer { nghttpd.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("files", port: nghttpd.port, caFile: tls ? pki.caCertificate : nil)],
                routes: ["{match: {prefix: /files/}, upstream: files, mode: passthrough}"])

            try await H2Upstream.expectDownload(h.base + "/files/big.bin", equals: nghttpd.files["files/big.bin"])

            let (exchange, r) = try await NghttpExchange.run(h.base + "/files/hello.txt")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(exchange.status == 200, "\(exchange.raw.suffix(2000))")
            let helloSize = nghttpd.files["files/hello.txt"]?.count ?? -1
            #expect(exchange.dataBytes == helloSize)
            #expect(exchange.header("x-request-id") != nil)
            // Trailers stay trailers: after the DATA, not folded into the head.
            for (name, value) in NghttpdFixture.standardTrailers {
                #expect(exchange.trailer(name) == value, "\(name) missing from \(exchange.trailers)")
                #expect(exchange.header(name) == nil)
            }
            try await h.stop()
        }

        /// 40 streams at once (2 connections × 20) for the 1 MiB file: every one answered 200.
        @Test func concurrentStreamsToAnH2cUpstreamAllComplete() async throws {
            let nghttpd = try NghttpdFixture()
            defer { nghttpd.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("files", port: nghttpd.port)],
                routes: ["{match: {prefix: /files/}, upstream: files, mode: passthrough}"])
            let r = try await Run.tool(
                "h2load", ["-n", "100", "-c", "2", "-m", "20", h.base + "/files/big.bin"], timeout: 120)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout.contains("100 total, 100 started, 100 done, 100 succeeded, 0 failed, 0 errored"), "\(r.stdout)")
            #expect(r.stdout.contains("status codes: 100 2xx"), "\(r.stdout)")
            try await h.stop()
        }

        /// A server whose stream limit (2) is below `maxStreamsPerConnection`
        /// (100): a new connection takes one stream until the server's
        /// SETTINGS say how many it takes. Before, a burst put 50 streams on
        /// it at once, the server refused those past 2, and a fifth of the
        /// requests ended 502 after their replays went the same way.
        @Test func aServerWithASmallStreamLimitRefusesNothing() async throws {
            let nghttpd = try NghttpdFixture(maxConcurrentStreams: 2)
            defer { nghttpd.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("files", port: nghttpd.port)],
                routes: ["{match: {prefix: /files/}, upstream: files, mode: passthrough}"])
            let r = try await Run.tool("h2load", ["-n", "100", "-c", "1", "-m", "50", h.base + "/files/hello.txt"], timeout: 120)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout.contains("status codes: 100 2xx"), "\(r.stdout)")
            try await h.stop()
        }

        /// `h2://` verifies the upstream like `https://`: another CA, or a
        /// name the certificate does not carry, is `502 upstream-unavailable`.
        @Test func anH2UpstreamIsVerified() async throws {
            let pki = try await TestPKI.shared.value
            let nghttpd = try NghttpdFixture(tls: pki)
            defer { nghttpd.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [
                    "other-ca: {endpoints: [\"h2://127.0.0.1:\(nghttpd.port)\"], tls: {caFile: \(pki.otherCACertificate), serverName: localhost}}",
                    "other-name: {endpoints: [\"h2://127.0.0.1:\(nghttpd.port)\"], tls: {caFile: \(pki.caCertificate), serverName: api.internal.example}}",
                    H2Upstream.upstream("right", port: nghttpd.port, caFile: pki.caCertificate),
                ],
                routes: [
                    "{match: {prefix: /files/other-ca/}, upstream: other-ca, mode: passthrough}",
                    "{match: {prefix: /files/other-name/}, upstream: other-name, mode: passthrough}",
                    "{match: {prefix: /files/}, upstream: right, mode: passthrough}",
                ])
            for path in ["/files/other-ca/x", "/files/other-name/x"] {
                let refused = try await h.send("GET", path)
                #expect(refused.status == 502, "\(path): \(refused.status) \(refused.body)")
                #expect(refused.reason == "upstream-unavailable", "\(path)")
            }
            #expect(try await h.send("GET", "/files/hello.txt").status == 200)
            try await h.stop()
        }

        /// A reload that replaces an `h2://` upstream's CA retires the
        /// multiplexed connection the old CA verified: the next request needs
        /// a connection the new CA verifies (here none can be: 502), and a
        /// reload back serves again on a fresh one.
        @Test func aReloadedCARetiresTheH2ConnectionTheOldOneVerified() async throws {
            let pki = try await TestPKI.shared.value
            let nghttpd = try NghttpdFixture(tls: pki)
            defer { nghttpd.stop() }
            let h = try await H2Upstream.gateway(
                upstreams: [H2Upstream.upstream("files", port: nghttpd.port, caFile: pki.caCertificate)],
                routes: ["{match: {prefix: /files/}, upstream: files, mode: passthrough}"])
            #expect(try await h.send("GET", "/files/hello.txt").status == 200)
            try await h.reload { $0.replacingOccurrences(of: "caFile: \(pki.caCertificate)", with: "caFile: \(pki.otherCACertificate)") }
            let refused = try await h.send("GET", "/files/hello.txt")
            #expect(refused.status == 502, "\(refused.status) \(refused.body)")
            #expect(refused.reason == "upstream-unavailable")
            try await h.reload { $0.replacingOccurrences(of: "caFile: \(pki.otherCACertificate)", with: "caFile: \(pki.caCertificate)") }
            #expect(try await h.send("GET", "/files/hello.txt").status == 200)
            try await h.stop()
        }
    }
}
