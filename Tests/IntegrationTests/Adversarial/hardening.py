#!/usr/bin/python3
"""Raw-socket clients that misbehave the way issue 14 found: abandoned and
stalled responses, trickled and stalled request bodies, heads that never end,
invalid chunked bodies, underscore headers. HTTP/2 frames come from python3-h2's
hyperframe/hpack, so nothing is hidden behind a client library's good manners.

usage: hardening.py MODE PORT [ARGS...]

Where a mode says "waits for a line", it reads one line from standard input
before going on: the test decides when (it watches the upstream), so no step
depends on a sleep. Every mode prints one JSON object on its last line.
"""
import json
import socket
import sys
import time

import hpack
from h2_attack import take_frames  # the frame reader the flood tests use
from hyperframe.frame import (ContinuationFrame, DataFrame, GoAwayFrame, HeadersFrame, PingFrame, RstStreamFrame,
                              SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def out(**kw):
    print(json.dumps(kw), flush=True)


def wait_for_line():
    sys.stdin.readline()


def connect(port, source=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=15,
                                 source_address=(source, 0) if source else None)
    return s


# ---------------------------------------------------------------- HTTP/1.1

def read_h1_response(s, limit=1 << 16):
    """Head and (content-length) body; None if the connection closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        headers[k.strip().lower().decode()] = v.strip().decode()
    length = int(headers.get("content-length", "0"))
    while len(body) < min(length, limit):
        chunk = s.recv(4096)
        if not chunk:
            break
        body += chunk
    return status, headers, body.decode(errors="replace")


def h1_abandon(port):
    s = connect(port)
    s.sendall(b"GET /download?bytes=104857600 HTTP/1.1\r\nHost: t\r\n\r\n")
    got = 0
    while got < (256 << 10):
        got += len(s.recv(65536))
    out(step="stalled", received=got)
    wait_for_line()
    s.close()
    out(step="closed")


def h1_no_read(port):
    s = connect(port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /download?bytes=104857600 HTTP/1.1\r\nHost: t\r\n\r\n")
    out(step="requested")
    wait_for_line()
    s.close()
    out(step="closed")


def h1_body(port, path, mode, extra_headers=""):
    """POST with Content-Length 1000000: `stall` sends 100 bytes then nothing,
    `trickle` one byte every 100 ms. Reports the answer and when it came."""
    s = connect(port)
    start = time.monotonic()
    s.sendall(("POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n%s\r\n" % (path, extra_headers)).encode())
    if mode == "stall":
        s.sendall(b"a" * 100)
    elif mode == "trickle":
        s.setblocking(False)
        while time.monotonic() - start < 20:
            try:
                s.sendall(b"a")
            except (BlockingIOError, OSError):
                break
            try:
                if s.recv(1, socket.MSG_PEEK):
                    break
            except BlockingIOError:
                pass
            except OSError:
                break
            time.sleep(0.1)
        s.setblocking(True)
    r = read_h1_response(s)
    elapsed = time.monotonic() - start
    if r is None:
        out(status=0, elapsed=elapsed)
    else:
        out(status=r[0], elapsed=elapsed, body=r[2], retryAfter=r[1].get("retry-after"),
            connection=r[1].get("connection"))


def h1_head_only(port, path, length, hold=False, extra_headers=""):
    """POST with a Content-Length and no body (`extra_headers`: raw header
    lines, \\r\\n escapes allowed). With `hold`, waits for a line (still
    without sending the body) before reading the answer."""
    s = connect(port)
    start = time.monotonic()
    extra = extra_headers.encode().decode("unicode_escape")
    s.sendall(("POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n%s\r\n" % (path, length, extra)).encode())
    if hold:
        out(step="sent")
        wait_for_line()
    r = read_h1_response(s)
    elapsed = time.monotonic() - start
    out(status=r[0] if r else 0, elapsed=elapsed, body=r[2] if r else "",
        retryAfter=r[1].get("retry-after") if r else None)


def h1_partial_head(port):
    s = connect(port)
    start = time.monotonic()
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
    try:
        data = s.recv(4096)
    except socket.timeout:
        data = None
    out(closedAfter=time.monotonic() - start, closed=data == b"")


def h1_bad_chunk(port, chunk_line):
    s = connect(port)
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
    out(step="sent")
    wait_for_line()
    s.sendall(chunk_line.encode().decode("unicode_escape").encode("latin-1"))
    r = read_h1_response(s)
    if r is None:
        out(status=0)
    else:
        out(status=r[0], body=r[2], connection=r[1].get("connection"))


def h1_raw(port, request):
    """Sends `request` (\\r\\n escapes allowed) and prints the answer."""
    s = connect(port)
    s.sendall(request.encode().decode("unicode_escape").encode("latin-1"))
    r = read_h1_response(s)
    out(status=r[0] if r else 0, body=r[2] if r else "")


class H1Reader:
    """Responses read back to back from one connection (content-length bodies)."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def _fill(self):
        chunk = self.s.recv(65536)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def response(self):
        """(status, body), or None when the connection closed first."""
        try:
            while b"\r\n\r\n" not in self.buf:
                self._fill()
            head, _, self.buf = self.buf.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = 0
            for line in lines[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(self.buf) < length:
                self._fill()
            body, self.buf = self.buf[:length], self.buf[length:]
            return int(lines[0].split(b" ")[1]), body.decode("latin-1")
        except (EOFError, OSError):
            return None


def h1_pipelined(port, count):
    """A slow request, then `count` requests the gateway answers itself, then
    an upload whose body is half sent, all in one write: the later requests
    wait in the gateway behind the slow one and are handed on as it ends.
    Once every answer before the upload's is in, the rest of its body goes."""
    s = connect(port)
    s.settimeout(30)
    local = b"GET /assertgate/v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
    s.sendall(b"GET /slow?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n" + local * count
              + b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nwx")
    r = H1Reader(s)
    statuses = []
    for _ in range(count + 1):
        got = r.response()
        if got is None:
            break
        statuses.append(got[0])
    if len(statuses) == count + 1:
        s.sendall(b"yz")
    last = r.response()
    out(answered=len(statuses), first=statuses[0] if statuses else 0,
        local=sorted(set(statuses[1:])), upload=last[0] if last else 0, upload_body=last[1] if last else "")


def hold_slow(port, count, ms, source):  # noqa: D401
    """`count` connections from `source`, each GET /slow?ms=...; reports how
    many were answered 200."""
    socks = []
    for _ in range(count):
        s = connect(port, source)
        s.sendall(("GET /slow?ms=%d HTTP/1.1\r\nHost: t\r\n\r\n" % ms).encode())
        socks.append(s)
    out(step="sent")
    ok = 0
    for s in socks:
        r = read_h1_response(s)
        if r and r[0] == 200:
            ok += 1
    out(ok=ok)


def conn_cap(port, sources):
    """One HTTP/2 connection from each source address in turn (comma-separated,
    127.0.0.0/8 all reach the loopback), kept open: each is "served" when the
    gateway answers its preface with SETTINGS, "closed" when the gateway closed
    it instead. Reports the list, waits for a line, then closes them all."""
    socks, results = [], []
    for source in sources.split(","):
        s = connect(port, source)
        socks.append(s)
        try:
            s.sendall(PREFACE + SettingsFrame(0).serialize())
            first = b""
            while len(first) < 9:
                chunk = s.recv(9 - len(first))
                if not chunk:
                    break
                first += chunk
            results.append("served" if len(first) == 9 else "closed")
        except (ConnectionResetError, BrokenPipeError):
            results.append("closed")
    out(step="held", results=results)
    wait_for_line()
    for s in socks:
        s.close()
    out(results=results)


def hold_body(port):
    """POST /upload with Content-Length 1000 and one byte of it; waits for a
    line, then closes."""
    s = connect(port)
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\na")
    out(step="sent")
    wait_for_line()
    s.close()
    out(step="closed")


# ---------------------------------------------------------------- HTTP/2

class H2:
    def __init__(self, port, settings=None, source=None):
        self.s = connect(port, source)
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.closed = False
        self.send_failed = False
        self.goaway = None
        f = SettingsFrame(0)
        for k, v in (settings or {}).items():
            f.settings[k] = v
        self.s.sendall(PREFACE + f.serialize())

    def send(self, frame):
        # A server that ends the connection (GOAWAY, then close) while frames are
        # still going out makes them fail: what it sent first is still read.
        try:
            self.s.sendall(frame.serialize())
        except (BrokenPipeError, ConnectionResetError):
            self.send_failed = True

    def request(self, sid, method, path, extra=(), end_stream=True, authority="127.0.0.1"):
        f = HeadersFrame(sid)
        f.data = self.enc.encode([(":method", method), (":scheme", "http"), (":authority", authority),
                                  (":path", path)] + list(extra))
        f.flags.add("END_HEADERS")
        if end_stream:
            f.flags.add("END_STREAM")
        self.send(f)

    def frames(self, seconds):
        """Frames received within `seconds` (SETTINGS acked, PING answered)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.closed:
            self.s.settimeout(max(0.001, min(0.2, deadline - time.monotonic())))
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            frames, self.buf = take_frames(self.buf + data)
            for f in frames:
                if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
                    ack = SettingsFrame(0)
                    ack.flags.add("ACK")
                    self.send(ack)
                if isinstance(f, GoAwayFrame):
                    self.goaway = f.error_code
                yield f

    def answer_or_reset(self, sid, seconds):
        """(status, None) for stream `sid`'s answer, (None, code) for its reset,
        (None, None) when neither came within `seconds`."""
        for f in self.frames(seconds):
            if isinstance(f, HeadersFrame) and f.stream_id == sid:
                return self.status_of(f), None
            if isinstance(f, RstStreamFrame) and f.stream_id == sid:
                return None, f.error_code
        return None, None

    def status_of(self, frame):
        for k, v in self.dec.decode(frame.data):
            if k in (":status", b":status"):
                return int(v)
        return None


def h2_abandon(port, action):
    c = H2(port)
    c.request(1, "GET", "/download?bytes=104857600")
    got = 0
    # The stream's window is the default 64 KiB and never opened further: the
    # gateway's queue for it fills and it pauses its upstream.
    for f in c.frames(10):
        if isinstance(f, DataFrame) and f.stream_id == 1:
            got += len(f.data)
            if got >= (16 << 10):
                break
    out(step="stalled", received=got)
    wait_for_line()
    if action == "close":
        c.s.close()
        out(step="closed")
        return
    rst = RstStreamFrame(1)
    rst.error_code = 0x8  # CANCEL
    c.send(rst)
    out(step="reset")
    wait_for_line()
    # The connection still serves: a new stream on it gets its answer. The stalled
    # stream's DATA still in flight is skipped, and the window is opened again.
    wu = WindowUpdateFrame(0)
    wu.window_increment = 1 << 30
    c.send(wu)
    c.request(3, "GET", "/hello")
    status = None
    for f in c.frames(10):
        if isinstance(f, HeadersFrame) and f.stream_id == 3:
            status = c.status_of(f)
            break
    out(status=status or 0)


def h2_window_zero(port, streams, seconds=20.0):
    """Initial window 0 (nothing of any response can be sent), `streams`
    downloads, a PING every 200 ms so the connection is never idle. Reports
    the streams the gateway reset (all of them, or those reset within
    `seconds`), then waits for a line while still connected."""
    c = H2(port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0})
    for i in range(streams):
        c.request(1 + 2 * i, "GET", "/download?bytes=1048576")
    resets = {}
    start = time.monotonic()
    while len(resets) < streams and time.monotonic() - start < seconds and not c.closed:
        c.send(PingFrame(0))
        for f in c.frames(0.2):
            if isinstance(f, RstStreamFrame):
                resets[f.stream_id] = f.error_code
    result = dict(step="reset", resets=len(resets), codes=sorted(set(resets.values())), closed=c.closed,
                  elapsed=time.monotonic() - start)
    out(**result)
    wait_for_line()
    out(**result)


def h2_trickle_window(port, seconds):
    """Initial window 1, one download, then the stream's window opened by one
    byte every 100 ms (never quiet, never enough). Reports whether and when
    the gateway reset the stream, and the bytes received."""
    c = H2(port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1})
    c.request(1, "GET", "/download?bytes=1048576")
    start = time.monotonic()
    reset, received = None, 0
    while reset is None and time.monotonic() - start < seconds and not c.closed:
        wu = WindowUpdateFrame(1)
        wu.window_increment = 1
        c.send(wu)
        for f in c.frames(0.1):
            if isinstance(f, RstStreamFrame) and f.stream_id == 1:
                reset = f.error_code
            elif isinstance(f, DataFrame) and f.stream_id == 1:
                received += len(f.data)
    out(reset=reset, received=received, elapsed=time.monotonic() - start, closed=c.closed)


def h2_body(port, path, extra=()):
    """POST with content-length 1000, 10 bytes of DATA, then nothing: the answer
    (or reset) and when it came."""
    c = H2(port)
    start = time.monotonic()
    c.request(1, "POST", path, extra=[("content-length", "1000")] + list(extra), end_stream=False)
    d = DataFrame(1)
    d.data = b"a" * 10
    c.send(d)
    status, reset = c.answer_or_reset(1, 15)
    out(status=status or 0, reset=reset, elapsed=time.monotonic() - start)


def h2_reset_bodies(port, rounds, size):
    """`rounds` uploads, each cancelled (RST_STREAM) right after as much of its
    body as the windows allow, while the gateway still holds those bytes; then
    one upload of `size` bytes sent whole, honouring flow control: it completes
    only if the gateway gave the connection window of the cancelled ones back."""
    c = H2(port)
    windows = {0: 65535}
    initial = [65535]

    mine = []  # frames of the last stream, kept for the answer

    def pump(seconds, until=None):
        """Reads frames for up to `seconds` (or until `until()` holds), applying
        window updates; every frame is looked at, none dropped."""
        for f in c.frames(seconds):
            if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
                v = f.settings.get(SettingsFrame.INITIAL_WINDOW_SIZE)
                if v is not None:
                    for k in windows:
                        if k:
                            windows[k] += v - initial[0]
                    initial[0] = v
            elif isinstance(f, WindowUpdateFrame):
                if f.stream_id in windows:
                    windows[f.stream_id] += f.window_increment
            elif f.stream_id == 1 + 2 * rounds and isinstance(f, (HeadersFrame, DataFrame, RstStreamFrame)):
                mine.append(f)
            if until and until():
                return

    def send_body(sid, total, end, deadline):
        sent = 0
        while sent < total and time.monotonic() < deadline:
            n = min(total - sent, windows[0], windows[sid], 16384)
            if n <= 0:
                pump(0.2)
                continue
            d = DataFrame(sid)
            d.data = b"b" * n
            sent += n
            if end and sent == total:
                d.flags.add("END_STREAM")
            c.send(d)
            windows[0] -= n
            windows[sid] -= n
        return sent

    pump(0.3)  # the server's SETTINGS and its connection window
    cancelled = 0
    for r in range(rounds):
        sid = 1 + 2 * r
        windows[sid] = initial[0]
        c.request(sid, "POST", "/upload", extra=[("content-length", str(size))], end_stream=False)
        cancelled += send_body(sid, min(size, windows[0], windows[sid]), False, time.monotonic() + 1)
        rst = RstStreamFrame(sid)
        rst.error_code = 0x8
        c.send(rst)
    sid = 1 + 2 * rounds
    windows[sid] = initial[0]
    c.request(sid, "POST", "/upload", extra=[("content-length", str(size))], end_stream=False)
    sent = send_body(sid, size, True, time.monotonic() + 10)

    def answered():
        return any(isinstance(f, RstStreamFrame) or "END_STREAM" in f.flags for f in mine)

    pump(10, until=answered)
    status, body = None, b""
    for f in mine:
        if isinstance(f, HeadersFrame) and status is None:
            status = c.status_of(f)
        elif isinstance(f, DataFrame):
            body += f.data
    out(cancelled=cancelled, sent=sent, status=status or 0, body=body.decode("latin-1"))


def h2_reset_waiting(port, conns, per):
    """`conns` connections, each sending `per` requests (HEADERS with
    END_STREAM) each followed at once by its RST_STREAM, in one write: every
    request queues for the (held) upstream connection and leaves."""
    sent = 0
    for _ in range(conns):
        c = H2(port)
        out_bytes = b""
        for i in range(per):
            sid = 1 + 2 * i
            f = HeadersFrame(sid)
            f.data = c.enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"),
                                   (":path", "/hello")])
            f.flags.add("END_HEADERS")
            f.flags.add("END_STREAM")
            r = RstStreamFrame(sid)
            r.error_code = 0x8
            out_bytes += f.serialize() + r.serialize()
        c.s.sendall(out_bytes)
        sent += per
        for _ in c.frames(0.3):  # its SETTINGS; the resets are taken by now
            pass
        c.s.close()
    out(sent=sent)


def h2_head_only(port, path, extra_json="[]"):
    c = H2(port)
    start = time.monotonic()
    extra = [tuple(x) for x in json.loads(extra_json)]
    c.request(1, "POST", path, extra=[("content-length", "1000")] + extra, end_stream=False)
    status = None
    for f in c.frames(10):
        if isinstance(f, HeadersFrame) and f.stream_id == 1:
            status = c.status_of(f)
            break
    out(status=status or 0, elapsed=time.monotonic() - start)


def h2_get(port, authority, path, extra_json="[]"):
    """GET with the given :authority and :path (JSON-escaped, so any bytes
    below 256 can be sent as themselves) and extra fields: the answer's
    status, or the stream's reset."""
    c = H2(port)
    extra = [tuple(x) for x in json.loads(extra_json)]
    raw = lambda v: v.encode("latin-1")
    c.request(1, "GET", raw(path), extra=[(raw(k), raw(v)) for k, v in extra], authority=raw(authority))
    status, reset = c.answer_or_reset(1, 10)
    out(status=status or 0, reset=reset)


def h2_huge_field(port):
    """One header field of 70 KiB (over nghttp2's 64 KiB HPACK limit), sent
    as HEADERS + CONTINUATIONs of 16 KiB (the default frame size)."""
    c = H2(port)
    block = c.enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"),
                          (":path", "/hello"), ("x-big", "b" * (70 << 10))], huffman=False)
    pieces = [block[i:i + 16384] for i in range(0, len(block), 16384)]
    first = HeadersFrame(1)
    first.data = pieces[0]
    first.flags.add("END_STREAM")
    if len(pieces) == 1:
        first.flags.add("END_HEADERS")
    c.send(first)
    for i, piece in enumerate(pieces[1:]):
        cont = ContinuationFrame(1)
        cont.data = piece
        if i == len(pieces) - 2:
            cont.flags.add("END_HEADERS")
        c.send(cont)
    for _ in c.frames(5):
        pass
    out(goaway=c.goaway, closed=c.closed)


def main():
    mode, port, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if mode == "h1-abandon":
        h1_abandon(port)
    elif mode == "h1-no-read":
        h1_no_read(port)
    elif mode == "h1-body":
        h1_body(port, args[0], args[1], args[2] if len(args) > 2 else "")
    elif mode == "h1-head-only":
        h1_head_only(port, args[0], int(args[1]), hold=len(args) > 2 and args[2] == "hold",
                     extra_headers=args[3] if len(args) > 3 else "")
    elif mode == "h1-partial-head":
        h1_partial_head(port)
    elif mode == "h1-bad-chunk":
        h1_bad_chunk(port, args[0])
    elif mode == "h1-raw":
        h1_raw(port, args[0])
    elif mode == "h1-pipelined":
        h1_pipelined(port, int(args[0]))
    elif mode == "hold-slow":
        hold_slow(port, int(args[0]), int(args[1]), args[2])
    elif mode == "conn-cap":
        conn_cap(port, args[0])
    elif mode == "hold-body":
        hold_body(port)
    elif mode == "h2-abandon":
        h2_abandon(port, args[0])
    elif mode == "h2-trickle-window":
        h2_trickle_window(port, float(args[0]))
    elif mode == "h2-window-zero":
        h2_window_zero(port, int(args[0]), float(args[1]) if len(args) > 1 else 20.0)
    elif mode == "h2-body":
        h2_body(port, args[0])
    elif mode == "h2-reset-bodies":
        h2_reset_bodies(port, int(args[0]), int(args[1]))
    elif mode == "h2-reset-waiting":
        h2_reset_waiting(port, int(args[0]), int(args[1]))
    elif mode == "h2-head-only":
        h2_head_only(port, args[0], args[1] if len(args) > 1 else "[]")
    elif mode == "h2-get":
        h2_get(port, json.loads(args[0]), json.loads(args[1]), *args[2:])
    elif mode == "h2-huge-field":
        h2_huge_field(port)
    else:
        print("unknown mode " + mode, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
