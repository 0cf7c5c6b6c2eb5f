import AssertGateTestSupport
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
            def frame(ftype, flags, sid, payload):
                return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload
            def read_h2_response(sid):
                # Frames until the response HEADERS (or RST_STREAM) of `sid`; True
                # if it says 200 (HPACK static index 8, ":status 200", first).
                buf = b""
                while True:
                    while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                        chunk = s.recv(4096)
                        if not chunk:
                            return False
                        buf += chunk
                    n = int.from_bytes(buf[:3], "big")
                    ftype, sid_in, payload = buf[3], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]
                    buf = buf[9 + n:]
                    if ftype == 1 and sid_in == sid:
                        return payload[:1] == b"\x88"
                    if ftype == 3 and sid_in == sid:
                        return False
            # h2c prior knowledge; :method GET, :scheme http, :path /hello, :authority t
            block = b"\x82\x86" + b"\x04\x06/hello" + b"\x01\x01t"
            if mode == "preface-only":
                # HTTP/2's magic, then no SETTINGS: the protocol is not shown yet.
                s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            if mode in ("h2idle", "h2trickle", "h2refused"):
                s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
                # END_STREAM | END_HEADERS; "h2refused" adds a field name in
                # upper case, which HTTP/2 forbids: the stream is reset.
                bad = b"\x00\x05X-Bad\x01v" if mode == "h2refused" else b""
                s.sendall(frame(1, 0x5, 1, block + bad))
                responses += 1 if read_h2_response(1) else 0
            if mode == "h2trickle":
                # The next request's HEADERS frame, its payload one byte every
                # 50 ms: never idle, never complete. (CONTINUATION frames are
                # capped at 8 per block, so one frame is where a slow client
                # can drag a head out.)
                payload = block + b"\x00\x06x-slow\x64" + b"a" * 100
                s.sendall(frame(1, 0x5, 3, payload)[:9])
                for b in payload:
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

        /// Runs `mode` against a fresh gateway: the client got `responses`
        /// answers and the gateway closed the connection within `window`
        /// seconds of the connect.
        private func expectClosed(_ mode: String, responses: Int, within window: Range<Double>) async throws {
            let h = try await start()
            let o = try await run(h, mode)
            #expect(o.responses == responses)
            let closedAfter = try #require(o.closedAfter)
            #expect(window.contains(closedAfter), "\(mode): closed after \(closedAfter) s")
            try await h.stop()
        }

        @Test func aRequestHeadTrickledByteByByteIsCut() async throws {
            // Bytes arrive every 50 ms, so the idle timeout (600 ms) never
            // fires; the header timeout (400 ms from the head's first byte) does.
            try await expectClosed("trickle", responses: 1, within: 0.38..<3)
        }

        @Test func anHTTP2HeaderBlockTrickledByteByByteIsCut() async throws {
            // Likewise for an HTTP/2 HEADERS payload: 400 ms from the frame.
            try await expectClosed("h2trickle", responses: 1, within: 0.38..<3)
        }

        @Test func anHTTP2ConnectionWithCompleteHeadersIsClosedOnlyWhenIdle() async throws {
            // The header clock stopped with the block: the idle timeout (600 ms), not 400 ms.
            try await expectClosed("h2idle", responses: 1, within: 0.58..<5)
        }

        @Test func anHTTP2HeaderBlockRefusedByNghttp2StopsTheHeaderClock() async throws {
            // Reset, not answered; the block ended with its stream, so only the idle clock runs.
            try await expectClosed("h2refused", responses: 0, within: 0.58..<5)
        }

        /// A reload changes the timeouts new connections start with (the idle
        /// default follows the upstreams' response timeouts, which a reload may raise).
        @Test func reloadedTimeoutsApplyToNewConnections() async throws {
            let h = try await Harness.start { config in config.listeners[0].handshakeTimeout = .seconds(20) }
            var config = h.gateway.config
            config.listeners[0].handshakeTimeout = .milliseconds(300)
            let result = try h.gateway.reloadListeners(from: config)
            #expect(result.needRestart.isEmpty)
            let o = try await run(h, "silent")
            let closedAfter = try #require(o.closedAfter)
            #expect((0.28..<5).contains(closedAfter), "closed after \(closedAfter) s")
            try await h.stop()
        }

        /// A connection has shown its protocol only with HTTP/2's SETTINGS
        /// after the magic (or an HTTP/1.1 request byte): until then the
        /// handshake deadline holds, not the idle timeout (10 s here).
        @Test func anHTTP2PrefaceWithoutSettingsIsClosedAtTheHandshakeTimeout() async throws {
            let h = try await Harness.start { config in
                config.listeners[0].handshakeTimeout = .milliseconds(300)
                config.listeners[0].idleTimeout = .seconds(10)
            }
            let o = try await run(h, "preface-only")
            let closedAfter = try #require(o.closedAfter)
            #expect((0.28..<5).contains(closedAfter), "closed after \(closedAfter) s")
            try await h.stop()
        }

        @Test func aConnectionThatSendsNothingIsClosedAfterTheHandshakeTimeout() async throws {
            try await expectClosed("silent", responses: 0, within: 0.28..<5)
        }

        @Test func anIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout() async throws {
            try await expectClosed("idle", responses: 1, within: 0.58..<5)
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
