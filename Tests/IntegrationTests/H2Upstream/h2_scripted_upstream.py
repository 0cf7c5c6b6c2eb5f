#!/usr/bin/python3
"""A cleartext HTTP/2 upstream (python3-h2) that misbehaves on request, for
the gateway's HTTP/2-upstream tests. Prints "PORT <n>" once listening on
127.0.0.1; exits when stdin closes.

Paths:
  /echo              200, JSON: the request's headers, trailers and body length,
                     then trailers (x-up-trailer: done)
  /ok                200 "ok", then trailers (x-up-trailer: done, x-assertgate-trust: forged)
  /reset-after-head  200 head and 5 bytes, then RST_STREAM(INTERNAL_ERROR)
  /cancel-after-head the same with RST_STREAM(CANCEL)
  /noerror-after-head the same with RST_STREAM(NO_ERROR), the response unfinished
  /flow-after-head   the same with RST_STREAM(FLOW_CONTROL_ERROR)
  /reset-before-head RST_STREAM(INTERNAL_ERROR) at once
  /status-099, /status-600  a final head with that :status, then "ok"
  /odd-fields        200 with x_assertgate_user and x-assertgate_trust (the
                     trust prefix spelled with `_`) and te: trailers, then "ok"
  /big-head          200 whose head is 13 fields of 16 KiB (13 CONTINUATIONs)
  /early-hints       a 103 (link, x-assertgate-trust: forged), then 200 "ok"
  /refuse-once       the first one: GOAWAY naming the stream before it (so it
                     was never processed), then the connection closes; later
                     ones: 200 "second"
  /early             401 with END_STREAM as soon as the head arrives, before the
                     request body, and no RST_STREAM (RFC 9113 §8.1 makes it
                     optional): the body is read and dropped
  /refuse-once-echo  refused like /refuse-once (the same once), then /echo
  /drop-once         the first one: the connection is closed with no GOAWAY
                     (a server that died); later ones: 200 "second"
  /slow              200 "ok" after 50 ms
  /freeze            this connection stops reading and writing (no PING ACK)
  /hang              never answered (counted); a RST_STREAM for it is counted
  /stats             JSON counters: connections, resets (RST_STREAM received),
                     maxConcurrent (streams open at once on one connection),
                     hangs (/hang requests seen)
"""
import asyncio
import json
import sys

import h2.config
import h2.connection
import h2.errors
import h2.events

STATS = {"connections": 0, "resets": 0, "maxConcurrent": 0, "hangs": 0}
REFUSED = False
DROPPED = False


class Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                                                            validate_outbound_headers=False))
        self.requests = {}   # stream id -> {"headers", "body", "trailers"}
        self.pending = {}    # stream id -> bytes still to send (flow control)
        self.open = set()
        self.frozen = False

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.writer.write(data)

    def send_body(self, sid, body, end, trailers=None):
        self.pending[sid] = (body, end, trailers)
        self.pump(sid)

    def pump(self, sid):
        if sid not in self.pending:
            return
        body, end, trailers = self.pending[sid]
        while body:
            window = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size)
            if window <= 0:
                self.pending[sid] = (body, end, trailers)
                return
            chunk, body = body[:window], body[window:]
            self.h2.send_data(sid, chunk)
        del self.pending[sid]
        self.open.discard(sid)
        if trailers:
            self.h2.send_headers(sid, trailers, end_stream=True)
        elif end:
            self.h2.end_stream(sid)

    def answer(self, sid):
        global REFUSED, DROPPED
        req = self.requests[sid]
        path = req["headers"].get(":path", "").lower()  # as Express reads paths
        if path == "/echo":
            body = json.dumps({"headers": req["headers"], "trailers": req["trailers"], "bodyLength": len(req["body"])}).encode()
            self.h2.send_headers(sid, [(":status", "200"), ("content-type", "application/json")])
            self.send_body(sid, body, True, [("x-up-trailer", "done")])
        elif path == "/ok":
            self.h2.send_headers(sid, [(":status", "200"), ("content-type", "text/plain")])
            self.send_body(sid, b"ok", True, [("x-up-trailer", "done"), ("x-assertgate-trust", "forged")])
        elif path == "/reset-after-head":
            self.h2.send_headers(sid, [(":status", "200")])
            self.h2.send_data(sid, b"hello")
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
        elif path == "/cancel-after-head":
            self.h2.send_headers(sid, [(":status", "200")])
            self.h2.send_data(sid, b"hello")
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        elif path == "/noerror-after-head":
            self.h2.send_headers(sid, [(":status", "200")])
            self.h2.send_data(sid, b"hello")
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.NO_ERROR)
        elif path == "/flow-after-head":
            self.h2.send_headers(sid, [(":status", "200")])
            self.h2.send_data(sid, b"hello")
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.FLOW_CONTROL_ERROR)
        elif path in ("/status-099", "/status-600"):
            self.h2.send_headers(sid, [(":status", path[-3:])])
            self.send_body(sid, b"ok", True)
        elif path == "/odd-fields":
            self.h2.send_headers(sid, [(":status", "200"), ("x_assertgate_user", "forged"),
                                       ("x-assertgate_trust", "mixed"), ("te", "trailers")])
            self.send_body(sid, b"ok", True)
        elif path == "/early-hints":
            self.h2.send_headers(sid, [(":status", "103"), ("link", "</a.css>; rel=preload"),
                                       ("x-assertgate-trust", "forged")])
            self.h2.send_headers(sid, [(":status", "200")])
            self.send_body(sid, b"ok", True)
        elif path == "/big-head":
            self.h2.send_headers(sid, [(":status", "200")] + [("x-big-%d" % i, "b" * 16000) for i in range(13)])
            self.send_body(sid, b"ok", True)
        elif path == "/reset-before-head":
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
        elif path in ("/refuse-once", "/refuse-once-echo"):
            if not REFUSED:
                REFUSED = True
                self.h2.close_connection(last_stream_id=max(0, sid - 2))
                self.flush()
                self.writer.close()
                return
            if path == "/refuse-once-echo":
                req["headers"][":path"] = "/echo"
                return self.answer(sid)
            self.h2.send_headers(sid, [(":status", "200")])
            self.send_body(sid, b"second", True)
        elif path == "/drop-once":
            if not DROPPED:
                DROPPED = True
                self.writer.close()
                return
            self.h2.send_headers(sid, [(":status", "200")])
            self.send_body(sid, b"second", True)
        elif path == "/slow":
            # 50 ms later: requests pile up, so the gateway's stream limits show.
            def later():
                self.h2.send_headers(sid, [(":status", "200")])
                self.send_body(sid, b"ok", True)
                self.flush()
            asyncio.get_running_loop().call_later(0.05, later)
        elif path == "/hang":
            STATS["hangs"] += 1
            return
        elif path == "/freeze":
            self.frozen = True
        elif path == "/stats":
            self.h2.send_headers(sid, [(":status", "200"), ("content-type", "application/json")])
            self.send_body(sid, json.dumps(STATS).encode(), True)
        else:
            self.h2.send_headers(sid, [(":status", "404")], end_stream=True)

    async def run(self):
        STATS["connections"] += 1
        self.h2.initiate_connection()
        self.flush()
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    return
                try:
                    events = self.h2.receive_data(data)
                except Exception:
                    return
                for e in events:
                    if isinstance(e, h2.events.RequestReceived):
                        self.requests[e.stream_id] = {"headers": dict(e.headers), "body": b"", "trailers": {}}
                        self.open.add(e.stream_id)
                        STATS["maxConcurrent"] = max(STATS["maxConcurrent"], len(self.open))
                        if e.stream_ended is not None:
                            self.answer(e.stream_id)
                        elif dict(e.headers).get(":path") == "/early":
                            self.requests[e.stream_id]["answered"] = True
                            self.open.discard(e.stream_id)
                            self.h2.send_headers(e.stream_id, [(":status", "401")], end_stream=True)
                    elif isinstance(e, h2.events.DataReceived):
                        if e.stream_id in self.requests:
                            self.requests[e.stream_id]["body"] += e.data
                        self.h2.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                    elif isinstance(e, h2.events.TrailersReceived):
                        self.requests[e.stream_id]["trailers"] = dict(e.headers)
                    elif isinstance(e, h2.events.StreamEnded):
                        if e.stream_id in self.requests and not self.requests[e.stream_id].get("answered"):
                            self.requests[e.stream_id]["answered"] = True
                            self.answer(e.stream_id)
                    elif isinstance(e, h2.events.StreamReset):
                        STATS["resets"] += 1
                        self.open.discard(e.stream_id)
                        self.pending.pop(e.stream_id, None)
                    elif isinstance(e, h2.events.WindowUpdated):
                        for sid in list(self.pending):
                            self.pump(sid)
                    if hasattr(e, "stream_ended") and e.stream_ended is not None and isinstance(e, h2.events.RequestReceived):
                        self.requests[e.stream_id]["answered"] = True
                self.flush()
                await self.writer.drain()
                if self.frozen:
                    await asyncio.Future()  # a peer that is there and says nothing
        finally:
            self.writer.close()


async def main():
    server = await asyncio.start_server(lambda r, w: Conn(r, w).run(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    loop = asyncio.get_running_loop()
    # Exit when the test closes stdin.
    await loop.run_in_executor(None, sys.stdin.read)


asyncio.run(main())
