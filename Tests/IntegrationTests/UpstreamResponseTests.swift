import AssertGateCore
import AssertGateTestSupport
import Foundation
import Testing

extension Integration {
    /// Responses from an upstream that does not behave: the gateway's own
    /// HTTP/1.1 response parser must frame them right, refuse what could
    /// smuggle, and never reuse a connection it cannot trust.
    @Suite(.serialized) struct UpstreamResponseTests {
        static let answers: [String: String] = [
            "/chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                + "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: dropped\r\n\r\n",
            "/both": "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "/listed": "HTTP/1.1 200 OK\r\nConnection: X-Secret\r\nX-Secret: internal\r\nX-Public: yes\r\n"
                + "Content-Length: 2\r\n\r\nok",
            "/until-close": "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nthe whole body",
            "/garbage-after": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK",
            "/folded": "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
            "/ok": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            // A response begun, then the connection closed.
            "/partial-head": "HTTP/1.1 200 OK\r\nContent-Le",
            "/interim-only": "HTTP/1.1 100 Continue\r\n\r\n",
            "/early-hints": "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nX-AssertGate-Trust: forged\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "/many-hints": String(repeating: "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n", count: 20)
                + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            // A head, then nothing (server-sent events, a long poll).
            "/head-then-silence": "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
            "/cut": "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npartial-body-",
            "/double-length": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
            "/gzip-chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nzz\r\n0\r\n\r\n",
            "/status-600": "HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok",
            // Not allowed (RFC 9110 §8.6), and nghttp2 clients reset a 204 carrying it.
            "/204-length": "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-Kept: yes\r\n\r\n",
            // A head near the parser's 64 KiB (63 KiB), of many fields: past
            // nghttp2's default 64 KiB estimate for a HEADERS frame to send
            // (12 bytes a field where the head spends 4).
            "/big-head": bigHead,
        ]

        /// 254 fields `X-F000: vvv…` (245 bytes each), then `Content-Length: 0`.
        static let bigHead: String = {
            var head = "HTTP/1.1 200 OK\r\n"
            let value = String(repeating: "v", count: 245)
            for i in 0..<254 {
                let name: String = "X-F" + String(String(i + 1000).suffix(3))
                head += name + ": " + value + "\r\n"
            }
            return head + "Content-Length: 0\r\n\r\n"
        }()

        private func curl(_ h: Harness, _ path: String, http1: Bool = false) async throws -> (status: Int, headers: String, body: String) {
            let r = try await Run.tool(
                "curl", ["-sS", http1 ? "--http1.1" : "--http2-prior-knowledge", "-D", "-", "--max-time", "10", h.base + path])
            #expect(r.status == 0, "\(r.stderr)")
            let parts = r.stdout.components(separatedBy: "\r\n\r\n")
            let status = Int(parts.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
            return (status, parts.first?.lowercased() ?? "", parts.dropFirst().joined(separator: "\r\n\r\n"))
        }

        /// A head followed by silence reaches an HTTP/1.1 client at once, as it
        /// reaches an HTTP/2 one (it waited for the first body byte); an
        /// HTTP/1.0 client is answered in HTTP/1.0, never with chunked
        /// framing it cannot read (RFC 9112 §6.1), the body ending with the connection.
        @Test func aHeadIsSentAtOnceAndHTTP10ClientsAreNeverChunked() async throws {
            let up = try await ScriptedUpstream(answers: Self.answers)
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)])
            for proto in ["--http1.1", "--http2-prior-knowledge"] {
                // curl gives up after 2 s (exit 28): the head must have come before.
                let r = try await Run.tool("curl", ["-sS", proto, "-D", "-", "--max-time", "2", h.base + "/head-then-silence"])
                #expect(r.status == 28, "\(r.stderr)")
                #expect(r.stdout.lowercased().contains("content-type: text/event-stream"), "\(proto): \(r.stdout)")
            }
            let old = try await Run.tool("curl", ["-sS", "--http1.0", "--raw", "-D", "-", "--max-time", "10", h.base + "/chunked"])
            #expect(old.status == 0, "\(old.stderr)")
            let lower = old.stdout.lowercased()
            #expect(lower.hasPrefix("http/1.0 200"), "\(old.stdout)")
            #expect(!lower.contains("transfer-encoding"), "\(old.stdout)")
            #expect(lower.contains("connection: close"), "\(old.stdout)")
            #expect(old.stdout.hasSuffix("\r\n\r\nhello, world"), "\(old.stdout)")
            try await h.stop()
            try await up.stop()
        }

        /// An upstream's 103 reaches HTTP/1.1 and HTTP/2 clients before the
        /// answer (RFC 9110 §15.2), without trust fields; at most eight of
        /// them; never an HTTP/1.0 client, which cannot read one.
        @Test func earlyHintsArePassedOn() async throws {
            let up = try await ScriptedUpstream(answers: Self.answers)
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)])
            for proto in ["--http1.1", "--http2-prior-knowledge"] {
                let r = try await Run.tool("curl", ["-sS", proto, "-D", "-", "--max-time", "10", h.base + "/early-hints"])
                let text = r.stdout.lowercased()
                let hints = text.range(of: " 103")
                let final = text.range(of: " 200")
                #expect(hints != nil && final != nil && hints!.lowerBound < final!.lowerBound, "\(proto): \(r.stdout)")
                #expect(text.contains("link: </a.css>; rel=preload"), "\(r.stdout)")
                #expect(!text.contains("forged"), "\(r.stdout)")
                #expect(r.stdout.hasSuffix("ok"), "\(r.stdout)")
                let many = try await Run.tool("curl", ["-sS", proto, "-D", "-", "--max-time", "10", h.base + "/many-hints"])
                #expect(many.stdout.lowercased().components(separatedBy: " 103").count - 1 == 8, "\(many.stdout)")
                #expect(many.stdout.hasSuffix("ok"))
            }
            let old = try await Run.tool("curl", ["-sS", "--http1.0", "-D", "-", "--max-time", "10", h.base + "/early-hints"])
            #expect(old.stdout.hasPrefix("HTTP/1.0 200"), "\(old.stdout)")
            try await h.stop()
            try await up.stop()
        }

        /// A kept-alive connection that closes before a response is a stale
        /// one, and its bodiless idempotent request is sent again; one that
        /// closes after sending part of a response (a partial head, a 1xx)
        /// took the request: never sent twice, 502.
        @Test func aRequestWhoseResponseHadBegunIsNotSentAgain() async throws {
            let up = try await ScriptedUpstream(answers: Self.answers, closeAfter: ["/partial-head", "/interim-only"])
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)], threads: 1)
            for path in ["/partial-head", "/interim-only"] {
                // /ok first, so the request goes on a kept-alive connection.
                let r = try await Run.tool("curl", ["-sS", "--http1.1", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code} ", h.base + "/ok", h.base + path])
                #expect(r.stdout == "200 502 ", "\(path): \(r.stdout) \(r.stderr)")
                #expect(up.requests.filter { $0 == "GET \(path)" }.count == 1, "\(up.requests)")
            }
            try await h.stop()
            try await up.stop()
        }

        @Test(arguments: [false, true])
        func oddButValidResponsesAreFramedRight(http1: Bool) async throws {
            let up = try await ScriptedUpstream(answers: Self.answers, closeAfter: ["/until-close"])
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)])
            let chunked = try await curl(h, "/chunked", http1: http1)
            #expect(chunked.status == 200)
            #expect(chunked.body == "hello, world")
            #expect(!chunked.headers.contains("x-trailer"))
            let listed = try await curl(h, "/listed", http1: http1)
            #expect(listed.body == "ok")
            #expect(listed.headers.contains("x-public: yes"))
            #expect(!listed.headers.contains("x-secret"), "a field the upstream's Connection lists is hop-by-hop")
            let untilClose = try await curl(h, "/until-close", http1: http1)
            #expect(untilClose.status == 200)
            #expect(untilClose.body == "the whole body")
            try await h.stop()
            try await up.stop()
        }

        @Test func smugglingSignalsAreAnswered502() async throws {
            let up = try await ScriptedUpstream(answers: Self.answers)
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)])
            for path in ["/both", "/folded", "/gzip-chunked", "/status-600"] {
                let r = try await curl(h, path)
                #expect(r.status == 502, "\(path)")
                #expect(r.body.contains("upstream-unavailable"), "\(path)")
            }
            try await h.stop()
            try await up.stop()
        }

        /// A 204 loses the Content-Length it must not have (its other fields
        /// stay); a head of 254 fields near 64 KiB reaches an HTTP/2 client
        /// whole (nghttp2 would not send its HEADERS under its default limit,
        /// and the stream hung with no answer).
        @Test(arguments: [false, true])
        func bodylessAndLargeHeadsReachTheClient(http1: Bool) async throws {
            let up = try await ScriptedUpstream(answers: Self.answers)
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)])
            let noContent = try await curl(h, "/204-length", http1: http1)
            #expect(noContent.status == 204)
            #expect(noContent.headers.contains("x-kept: yes"))
            #expect(!noContent.headers.contains("content-length: 5"))
            let big = try await curl(h, "/big-head", http1: http1)
            #expect(big.status == 200)
            #expect(big.headers.contains("x-f253: " + String(repeating: "v", count: 245)))
            try await h.stop()
            try await up.stop()
        }

        /// A body delimited by the close, cut by a reset: the client must see it fail,
        /// not a complete response (RFC 9112 §8).
        @Test(arguments: [false, true])
        func aResetIsNotTheEndOfABody(http1: Bool) async throws {
            let up = try await ScriptedUpstream(answers: Self.answers, resetAfter: ["/cut"])
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)])
            let r = try await Run.tool(
                "curl", ["-sS", http1 ? "--http1.1" : "--http2-prior-knowledge", "--max-time", "10", h.base + "/cut"])
            #expect(r.status != 0, "curl saw a complete response: \(r.stdout)")
            try await h.stop()
            try await up.stop()
        }

        /// An unreadable answer on a kept-alive connection: the upstream may have
        /// acted on the request, so it is not sent again.
        @Test func anUnreadableResponseIsNotReplayed() async throws {
            let up = try await ScriptedUpstream(answers: Self.answers)
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)], threads: 1)
            #expect(try await curl(h, "/ok").status == 200)
            for path in ["/folded", "/double-length"] {
                let r = try await Run.tool(
                    "curl", ["-sS", "--http2-prior-knowledge", "-X", "GET", "-o", "/dev/null", "-w", "%{http_code}",
                             "--max-time", "10", h.base + path])
                #expect(r.stdout == "502", "\(path): \(r.stdout)")
                #expect(up.requests.filter { $0 == "GET \(path)" }.count == 1, "\(up.requests)")
            }
            try await h.stop()
            try await up.stop()
        }

        @Test func aConnectionWithBytesAfterTheResponseIsNotReused() async throws {
            let up = try await ScriptedUpstream(answers: Self.answers)
            let h = try await Harness.start(upstreamEndpoints: [UpstreamEndpoint(host: "127.0.0.1", port: up.port)], threads: 1)
            let first = try await curl(h, "/garbage-after")
            #expect(first.status == 200)
            #expect(first.body == "ok")
            let before = up.connections
            // Kept-alive connections are reused; the one that carried junk is not.
            #expect(try await curl(h, "/ok").body == "ok")
            #expect(try await curl(h, "/ok").body == "ok")
            #expect(up.connections == before + 1)
            try await h.stop()
            try await up.stop()
        }
    }
}
