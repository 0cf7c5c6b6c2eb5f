#!/usr/bin/python3
"""Adversarial HTTP/2 clients for AssertGate's integration tests.

usage: h2_attack.py PORT ATTACK
ATTACK: rapid-reset | made-you-reset | continuation-flood | huge-headers | settings-flood | ping-flood | empty-data-flood

Exit status 0 when the gateway defended itself (GOAWAY, RST_STREAM or a closed
connection before the attack could complete), 1 when it did not, 2 on setup errors.
Prints one line describing what was observed.
"""
import socket
import sys
import time

import hpack
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def take_frames(buf):
    """The whole frames at the start of `buf`, parsed, and the bytes left over."""
    frames = []
    while len(buf) >= 9:
        f, length = Frame.parse_frame_header(memoryview(buf[:9]))
        if len(buf) < 9 + length:
            break
        f.parse_body(memoryview(buf[9:9 + length]))
        buf = buf[9 + length:]
        frames.append(f)
    return frames, buf


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(PREFACE + SettingsFrame(0).serialize())
    return s


def request_block(enc, path, extra=()):
    return enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"),
                       (":path", path)] + list(extra))


class Reader:
    """Parses frames from the server until a deadline; records GOAWAY / RST_STREAM."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.goaway = None
        self.resets = {}
        self.closed = False
        self.headers_streams = set()

    def pump(self, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline and not self.closed and self.goaway is None:
            self.sock.settimeout(max(0.001, min(0.2, deadline - time.time())))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            frames, self.buf = take_frames(self.buf + data)
            for f in frames:
                if isinstance(f, GoAwayFrame):
                    self.goaway = f.error_code
                elif isinstance(f, RstStreamFrame):
                    self.resets[f.stream_id] = f.error_code
                elif isinstance(f, HeadersFrame):
                    self.headers_streams.add(f.stream_id)

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except (ConnectionResetError, BrokenPipeError, socket.timeout):
            self.closed = True
            return False

    def verdict(self, what):
        if self.goaway is not None:
            print(f"{what}: GOAWAY error_code={self.goaway}")
            return 0
        if self.resets:
            print(f"{what}: {len(self.resets)} streams reset, codes={sorted(set(self.resets.values()))}")
            return 0
        if self.closed:
            print(f"{what}: connection closed by the server")
            return 0
        print(f"{what}: NO DEFENCE observed")
        return 1


def stream_storm(port, path, after):
    """100 batches of 100 streams, each a request for `path` (ended) followed
    by the frame `after(stream_id)` makes, until the server stops them.
    Returns the reader and the number of streams sent."""
    s = connect(port)
    r = Reader(s)
    enc = hpack.Encoder()
    sid = 1
    for batch in range(100):
        out = b""
        for _ in range(100):
            out += HeadersFrame(sid, request_block(enc, path), flags=["END_HEADERS", "END_STREAM"]).serialize()
            out += after(sid)
            sid += 2
        if not r.send(out):
            break
        r.pump(0.01)
        if r.goaway is not None or r.closed:
            break
    r.pump(3)
    return r, sid // 2


def rapid_reset(port):
    r, _ = stream_storm(port, "/slow?ms=5000", lambda sid: RstStreamFrame(sid, error_code=8).serialize())
    # Resets initiated by the client are not a defence: only GOAWAY or close counts here.
    r.resets = {}
    return r.verdict("rapid-reset")


def made_you_reset(port):
    """MadeYouReset (CVE-2025-8671): the client never sends RST_STREAM; it makes
    the server reset each stream instead, with a WINDOW_UPDATE that takes the
    stream's window past 2^31-1 (FLOW_CONTROL_ERROR, a stream error; nghttp2
    1.52 answers most other such errors with GOAWAY). Each request has been
    started by then. Like rapid-reset, only GOAWAY or a close counts as a
    defence."""
    r, sent = stream_storm(port, "/hello", lambda sid: WindowUpdateFrame(sid, window_increment=0x7fffffff).serialize())
    # Only the reset budget's GOAWAY(ENHANCE_YOUR_CALM) counts, and only when
    # no stream was refused: refusals (REFUSED_STREAM) spend another budget,
    # whose GOAWAY would pass this test without the defence under test.
    refused = sum(1 for code in r.resets.values() if code == 7)
    if r.goaway == 11 and refused == 0:
        print(f"made-you-reset: GOAWAY error_code=11 (of {sent} streams sent), none refused")
        return 0
    print(f"made-you-reset: NO DEFENCE observed (goaway={r.goaway}, closed={r.closed}, refused={refused})")
    return 1


def continuation_flood(port):
    s = connect(port)
    r = Reader(s)
    enc = hpack.Encoder()
    first = request_block(enc, "/")
    r.send(HeadersFrame(1, first).serialize())  # no END_HEADERS
    for i in range(20000):
        block = enc.encode([(f"x-flood-{i}", "a" * 100)])
        if not r.send(ContinuationFrame(1, block).serialize()):
            break
        if i % 100 == 0:
            r.pump(0.001)
            if r.goaway is not None or r.closed:
                break
    r.pump(3)
    return r.verdict("continuation-flood")


def huge_headers(port):
    s = connect(port)
    r = Reader(s)
    enc = hpack.Encoder()
    # 1 MiB of header list in 16 KiB chunks (max frame size), no indexing to keep it on the wire.
    extra = [(f"x-big-{i}", "b" * 1000) for i in range(1024)]
    block = enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"), (":path", "/")]
                       + extra)
    chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)]
    out = HeadersFrame(1, chunks[0], flags=["END_STREAM"] + (["END_HEADERS"] if len(chunks) == 1 else [])).serialize()
    for j, c in enumerate(chunks[1:], start=1):
        out += ContinuationFrame(1, c, flags=["END_HEADERS"] if j == len(chunks) - 1 else []).serialize()
    r.send(out)
    r.pump(3)
    if 1 in r.headers_streams and r.goaway is None and 1 not in r.resets:
        print("huge-headers: request was ANSWERED")
        return 1
    return r.verdict("huge-headers")


def settings_flood(port):
    s = connect(port)
    r = Reader(s)
    frame = SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 65535}).serialize()
    for i in range(200):
        if not r.send(frame * 100):
            break
        if r.goaway is not None or r.closed:
            break
        r.pump(0.001)
    r.pump(3)
    return r.verdict("settings-flood")


def ping_flood(port):
    s = connect(port)
    r = Reader(s)
    frame = PingFrame(0, opaque_data=b"12345678").serialize()
    for i in range(200):
        if not r.send(frame * 100):
            break
        r.pump(0.001)
        if r.goaway is not None or r.closed:
            break
    r.pump(3)
    return r.verdict("ping-flood")


def empty_data_flood(port):
    s = connect(port)
    r = Reader(s)
    enc = hpack.Encoder()
    block = enc.encode([(":method", "POST"), (":scheme", "http"), (":authority", "127.0.0.1"), (":path", "/upload")])
    r.send(HeadersFrame(1, block, flags=["END_HEADERS"]).serialize())
    frame = DataFrame(1, b"").serialize()
    for i in range(200):
        if not r.send(frame * 100):
            break
        r.pump(0.001)
        if r.goaway is not None or r.closed:
            break
    r.pump(3)
    return r.verdict("empty-data-flood")


ATTACKS = {
    "rapid-reset": rapid_reset,
    "made-you-reset": made_you_reset,
    "continuation-flood": continuation_flood,
    "huge-headers": huge_headers,
    "settings-flood": settings_flood,
    "ping-flood": ping_flood,
    "empty-data-flood": empty_data_flood,
}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ATTACKS:
        print(__doc__)
        sys.exit(2)
    sys.exit(ATTACKS[sys.argv[2]](int(sys.argv[1])))
