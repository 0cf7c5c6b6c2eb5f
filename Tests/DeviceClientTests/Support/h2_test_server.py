#!/usr/bin/python3
"""Small cleartext HTTP/2 server (python3-h2) for the DeviceClient tests.

Prints "PORT <n>" once listening on 127.0.0.1. Every request is answered with a
JSON echo: method, path, headers, body length and SHA-256, and the number of
streams this connection had open when it arrived.

Query parameters:  delay=<ms>  answer later;  size=<n>  answer with n bytes.
Path /stats answers the server-wide counters (deviceTokens: requests with an
assertgate-device-token header; distinctDeviceTokens: how many values). Path /goaway-test holds requests;
once --goaway-after of them are open on one connection (first time only), the
server answers the first --goaway-answer of them, sends GOAWAY with the last of
those as last-stream-id and ignores the rest.
"""
import argparse
import asyncio
import base64
import hashlib
import json
import os
import threading
import sys
from urllib.parse import urlsplit, parse_qs

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

STATS = {"connections": 0, "requests": 0, "maxConcurrent": 0, "goaways": 0,
         "attested": 0, "asserted": 0, "unasserted": 0, "maxInFlightPerKey": 0,
         "deviceTokens": 0, "distinctDeviceTokens": 0}
DEVICE_TOKENS = set()  # every assertgate-device-token value seen
GOAWAY_DONE = False
PREFIX = "/assertgate/v1"
LENIENT = "--lenient" in sys.argv  # accept real DeviceSim objects unverified (manual smoke runs)
CHALLENGES = {}   # challenge -> keyId bytes
KEYS = {}         # keyId bytes -> last counter
IN_FLIGHT = {}    # keyId bytes -> requests of that key being held


def b64decode(text):
    t = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(t + "=" * (-len(t) % 4))


def sha256(data):
    return hashlib.sha256(data).digest()


def problem(status, reason):
    return status, json.dumps({"status": status, "reason": reason}).encode()


def fake_gateway(method, path, headers, body):
    """The AssertGate routes, with a fake device: an attestation is just
    H(attestClientData); an assertion is counter (4 bytes BE) + H(assertClientData).
    Rebuilds both clientData strings independently of the Swift code."""
    if path == PREFIX + "/challenge":
        req = json.loads(body)
        challenge = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        CHALLENGES[challenge] = (b64decode(req["keyId"]), req["purpose"])
        return 200, json.dumps({"challenge": challenge, "expiresIn": 120}).encode()
    if path == PREFIX + "/attest":
        req = json.loads(body)
        key = b64decode(req["keyId"])
        if CHALLENGES.pop(req["challenge"], None) != (key, "attest"):
            return problem(403, "unknown-challenge")
        client_data = "assertgate-attest-v1\n%s\n%s" % (req["challenge"], req.get("userId") or "")
        if not LENIENT and b64decode(req["attestation"]) != sha256(client_data.encode()):
            return problem(403, "nonce-mismatch")
        if key in KEYS:
            return problem(409, "key-exists")
        KEYS[key] = 0
        STATS["attested"] += 1
        return 201, json.dumps({"keyId": req["keyId"], "trust": "attested"}).encode()
    return None


def check_assertion(method, path, headers, body):
    """Returns (keyId, None) when valid, (None, (status, body)) when not, (None, None) without headers."""
    key_text = headers.get("assertgate-key-id")
    assertion_text = headers.get("assertgate-assertion")
    if key_text is None and assertion_text is None:
        STATS["unasserted"] += 1
        return None, None
    key = b64decode(key_text)
    if key not in KEYS:
        return None, problem(401, "unknown-key")
    assertion = b64decode(assertion_text)
    if LENIENT:
        # A real CBOR assertion {"signature", "authenticatorData"}: only the
        # counter (authData bytes 33..37) is checked, no signature.
        auth = assertion[assertion.index(b"authenticatorData") + len(b"authenticatorData"):]
        auth = auth[2:] if auth[0] == 0x58 else auth[1:]
        counter = int.from_bytes(auth[33:37], "big")
        if counter <= KEYS[key]:
            return None, problem(403, "counter-replay")
        KEYS[key] = counter
        STATS["asserted"] += 1
        return key, None
    counter = int.from_bytes(assertion[:4], "big")
    challenge = headers.get("assertgate-challenge", "")
    if challenge:
        if CHALLENGES.pop(challenge, None) != (key, "assert"):
            return None, problem(403, "unknown-challenge")
    client_data = "assertgate-assert-v1\n%s\n%s\n%s\n%s" % (method, path, challenge, hashlib.sha256(body).hexdigest())
    if assertion[4:] != sha256(client_data.encode()):
        return None, problem(403, "bad-signature")
    if counter <= KEYS[key]:
        return None, problem(403, "counter-replay")
    KEYS[key] = counter
    STATS["asserted"] += 1
    return key, None


class Conn(asyncio.Protocol):
    def __init__(self, args):
        self.args = args
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.streams = {}  # id -> {"headers":..., "body": bytearray}
        self.open = 0
        self.held = []
        self.pending = {}
        self.closed = False

    def connection_made(self, transport):
        STATS["connections"] += 1
        self.transport = transport
        self.conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.args.max_streams},
        )
        self.conn.initiate_connection()
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data and not self.closed:
            self.transport.write(data)

    def data_received(self, data):
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            print("protocol error:", e, file=sys.stderr)
            self.flush()
            self.transport.close()
            return
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                self.open += 1
                STATS["maxConcurrent"] = max(STATS["maxConcurrent"], self.open)
                STATS["requests"] += 1
                token = dict(ev.headers).get("assertgate-device-token")
                if token is not None:
                    STATS["deviceTokens"] += 1
                    DEVICE_TOKENS.add(token)
                    STATS["distinctDeviceTokens"] = len(DEVICE_TOKENS)
                self.streams[ev.stream_id] = {"headers": ev.headers, "body": bytearray(), "open": self.open}
            elif isinstance(ev, h2.events.DataReceived):
                s = self.streams.get(ev.stream_id)
                if s is not None:
                    s["body"] += ev.data
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                self.request_done(ev.stream_id)
            elif isinstance(ev, h2.events.WindowUpdated):
                self.send_pending()
            elif isinstance(ev, h2.events.StreamReset):
                self.pending.pop(ev.stream_id, None)
                if ev.stream_id in self.streams:
                    self.streams.pop(ev.stream_id)
                    self.open -= 1
        self.flush()

    def request_done(self, sid):
        global GOAWAY_DONE
        s = self.streams[sid]
        headers = dict(s["headers"])
        target = urlsplit(headers.get(":path", "/"))
        query = parse_qs(target.query)
        method = headers.get(":method", "GET")
        answer = fake_gateway(method, target.path, headers, bytes(s["body"]))
        if answer is None:
            key, failure = check_assertion(method, headers.get(":path", "/"), headers, bytes(s["body"]))
            answer = failure
            if key is not None:
                IN_FLIGHT[key] = IN_FLIGHT.get(key, 0) + 1
                STATS["maxInFlightPerKey"] = max(STATS["maxInFlightPerKey"], IN_FLIGHT[key])
                s["key"] = key
        if answer is not None:
            s["answer"] = answer
            self.respond(sid)
            return
        if target.path == "/goaway-test" and not GOAWAY_DONE:
            self.held.append(sid)
            if len(self.held) >= self.args.goaway_after:
                GOAWAY_DONE = True
                answered = self.held[: self.args.goaway_answer]
                for h in answered:
                    self.respond(h)
                STATS["goaways"] += 1
                self.conn.close_connection(error_code=0, last_stream_id=answered[-1])
                self.flush()
            return
        if "reset" in query:
            self.streams.pop(sid)
            self.open -= 1
            self.conn.reset_stream(sid, error_code=int(query["reset"][0]))
            return
        delay = int(query.get("delay", ["0"])[0])
        if delay > 0:
            asyncio.get_running_loop().call_later(delay / 1000.0, self.respond_later, sid)
        else:
            self.respond(sid)

    def respond_later(self, sid):
        if self.closed or sid not in self.streams:
            return
        try:
            self.respond(sid)
        except h2.exceptions.ProtocolError:
            return
        self.flush()

    def respond(self, sid):
        s = self.streams.pop(sid)
        self.open -= 1
        headers = dict(s["headers"])
        target = urlsplit(headers.get(":path", "/"))
        query = parse_qs(target.query)
        status = query.get("status", ["200"])[0]
        if "key" in s:
            IN_FLIGHT[s["key"]] -= 1
        if "answer" in s:
            status, body = str(s["answer"][0]), s["answer"][1]
        elif target.path == "/stats":
            body = json.dumps(STATS).encode()
        elif "size" in query:
            n = int(query["size"][0])
            body = bytes((i * 7) % 251 for i in range(n))
        else:
            body = json.dumps({
                "method": headers.get(":method"),
                "path": headers.get(":path"),
                "authority": headers.get(":authority"),
                "headers": [[k, v] for k, v in s["headers"] if not k.startswith(":")],
                "bodyLength": len(s["body"]),
                "bodySha256": hashlib.sha256(bytes(s["body"])).hexdigest(),
                "openOnArrival": s["open"],
            }).encode()
        self.conn.send_headers(sid, [(":status", status), ("content-type", "application/json"),
                                     ("content-length", str(len(body))), ("x-echo", "1")])
        self.pending[sid] = memoryview(body)
        self.send_pending()

    def send_pending(self):
        # Respect the client's flow-control windows; resumed on WINDOW_UPDATE.
        for sid in list(self.pending):
            data = self.pending[sid]
            while len(data) > 0:
                n = min(len(data), self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
                if n <= 0:
                    break
                self.conn.send_data(sid, data[:n].tobytes())
                data = data[n:]
            if len(data) == 0:
                self.conn.end_stream(sid)
                del self.pending[sid]
            else:
                self.pending[sid] = data

    def connection_lost(self, exc):
        self.closed = True


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-streams", type=int, default=100)
    p.add_argument("--goaway-after", type=int, default=4)
    p.add_argument("--goaway-answer", type=int, default=2)
    p.add_argument("--lenient", action="store_true")
    args = p.parse_args()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Conn(args), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    # Exit when the test process goes away (its end of our stdin closes).
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
    async with server:
        await server.serve_forever()


asyncio.run(main())
