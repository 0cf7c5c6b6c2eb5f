import AssertGateCore
import Foundation
import NIOCore
import Testing

extension Integration {
    /// Client connections that never get going or go quiet are closed
    /// (listeners[].handshakeTimeout / idleTimeout), seen from a real socket.
    @Suite(.serialized) struct ConnectionTimeoutTests {
        /// Connects, then per `mode`: "silent" sends nothing; "idle" sends one
        /// keep-alive request and then nothing; "busy" sends a request every
        /// 200 ms for 1.2 s. Prints {"closedAfter": s, "responses": n}, where
        /// closedAfter is the time from connect to EOF.
        static let client = #"""
            import json, socket, sys, time
            port, mode = int(sys.argv[1]), sys.argv[2]
            s = socket.create_connection(("127.0.0.1", port))
            s.settimeout(10)
            start = time.monotonic()
            req = b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
            responses = 0
            def read_response():
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        return False
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                while len(body) < length:
                    body += s.recv(4096)
                return head.startswith(b"HTTP/1.1 200")
            if mode in ("idle", "busy"):
                rounds = 7 if mode == "busy" else 1
                for i in range(rounds):
                    s.sendall(req)
                    responses += 1 if read_response() else 0
                    if mode == "busy" and i < rounds - 1:
                        time.sleep(0.2)
            if mode == "busy":
                print(json.dumps({"closedAfter": None, "responses": responses, "open": time.monotonic() - start}))
                sys.exit(0)
            if mode == "trickle":
                # One request first (the connection is established), then the
                # next head one byte every 50 ms: never idle, never complete.
                s.sendall(req)
                responses += 1 if read_response() else 0
                for b in b"GET /hello HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 200:
                    try:
                        s.sendall(bytes([b]))
                    except OSError:
                        break
                    time.sleep(0.05)
                    if time.monotonic() - start > 5:
                        break
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass  # closed while we were still sending: the kernel answered with RST
            print(json.dumps({"closedAfter": time.monotonic() - start, "responses": responses}))
            """#

        struct Outcome: Decodable {
            var closedAfter: Double?
            var responses: Int
            var open: Double?
        }

        private func run(_ h: Harness, _ mode: String) async throws -> Outcome {
            let r = try await Run.tool("/usr/bin/python3", ["-c", Self.client, String(h.port), mode], timeout: 30)
            #expect(r.status == 0, "\(r.stderr)")
            return try JSONDecoder().decode(Outcome.self, from: Data(r.stdout.utf8))
        }

        private func start() async throws -> Harness {
            try await Harness.start(responseTimeout: .milliseconds(400)) { config in
                config.listeners[0].handshakeTimeout = .milliseconds(300)
                config.listeners[0].idleTimeout = .milliseconds(600)
                config.listeners[0].headerTimeout = .milliseconds(400)
            }
        }

        @Test func aRequestHeadTrickledByteByByteIsCut() async throws {
            let h = try await start()
            let o = try await run(h, "trickle")
            #expect(o.responses == 1)
            // Bytes arrive every 50 ms, so the idle timeout (600 ms) never
            // fires; the header timeout (400 ms from the head's first byte) does.
            let closedAfter = try #require(o.closedAfter)
            #expect(closedAfter >= 0.38 && closedAfter < 3, "closed after \(closedAfter) s")
            try await h.stop()
        }

        @Test func aConnectionThatSendsNothingIsClosedAfterTheHandshakeTimeout() async throws {
            let h = try await start()
            let o = try await run(h, "silent")
            let closedAfter = try #require(o.closedAfter)
            #expect(closedAfter >= 0.28 && closedAfter < 5, "closed after \(closedAfter) s")
            try await h.stop()
        }

        @Test func anIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout() async throws {
            let h = try await start()
            let o = try await run(h, "idle")
            #expect(o.responses == 1)
            let closedAfter = try #require(o.closedAfter)
            #expect(closedAfter >= 0.58 && closedAfter < 5, "closed after \(closedAfter) s")
            try await h.stop()
        }

        @Test func aConnectionInUseOutlivesTheIdleTimeout() async throws {
            let h = try await start()
            let o = try await run(h, "busy")
            // Seven requests 200 ms apart: open for ≥ 1.2 s, twice the idle timeout.
            #expect(o.responses == 7)
            #expect((o.open ?? 0) >= 1.2)
            try await h.stop()
        }
    }
}
