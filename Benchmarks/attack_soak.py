#!/usr/bin/python3
"""Issue 14's attacks 1-3, all at once for DURATION seconds, against a release
gateway with its default limits, while a well-behaved client keeps asking.
Reports the well-behaved client's latency (p50/p99/max, failures) and the
gateway's upstream connections before, at the end of, and after the attacks.

usage: attack_soak.py ASSERTGATE_BINARY [DURATION=60]

Attacks (all from 127.0.0.2; the well-behaved client uses 127.0.0.1):
  1. abandon: GET a 100 MiB response, read a little, stall 3 s, close
     (HTTP/1.1) or RST_STREAM(CANCEL) it (HTTP/2); 32 clients, again and again.
  2. trickle: 150 HTTP/1.1 POSTs with Content-Length 1000000 and one body byte
     every 5 s, reconnecting when refused; plus 2 HTTP/2 connections with
     SETTINGS_INITIAL_WINDOW_SIZE=0, 100 download streams each, a PING every 10 s.
  3. unauthenticated bodies: 8 HTTP/2 connections x 100 streams POSTing
     1 MiB - 1 to an enforce route with no assertion headers.
The upstream is a threaded Python server in this process (it reads every body
it is sent, as a legacy API would). Only 127.0.0.0/8 is used.
"""
import http.server
import json
import os
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

import hpack
from hyperframe.frame import DataFrame, Frame, HeadersFrame, PingFrame, RstStreamFrame, SettingsFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STOP = threading.Event()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/download"):
            n = 100 << 20
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"a" * (64 << 10)
            try:
                while n > 0:
                    self.wfile.write(chunk[:min(n, len(chunk))])
                    n -= len(chunk)
            except OSError:
                return
        else:
            body = b'{"ok":true}\n'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            while n > 0:
                got = self.rfile.read(min(n, 65536))
                if not got:
                    return
                n -= len(got)
        except OSError:
            return
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")


class ThreadedServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def upstream_connections(port):
    out = subprocess.run(["ss", "-Htn", "state", "established", "( sport = :%d )" % port],
                         capture_output=True, text=True).stdout
    return len([l for l in out.splitlines() if l.strip()])


def connect(port, src="127.0.0.2"):
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(src, 0))


def h2_request(enc, sid, method, path, extra=(), end=True):
    f = HeadersFrame(sid)
    f.data = enc.encode([(":method", method), (":scheme", "http"), (":authority", "t"), (":path", path)] + list(extra))
    f.flags.add("END_HEADERS")
    if end:
        f.flags.add("END_STREAM")
    return f.serialize()


def drain(s, seconds):
    s.settimeout(0.2)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not STOP.is_set():
        try:
            if not s.recv(65536):
                return False
        except socket.timeout:
            continue
        except OSError:
            return False
    return True


def attack_abandon(port, use_h2):
    while not STOP.is_set():
        try:
            s = connect(port)
            if use_h2:
                enc = hpack.Encoder()
                s.sendall(PREFACE + SettingsFrame(0).serialize() + h2_request(enc, 1, "GET", "/open/download"))
            else:
                s.sendall(b"GET /open/download HTTP/1.1\r\nHost: t\r\n\r\n")
            s.recv(65536)
            STOP.wait(3)  # the attack's stall
            if use_h2:
                rst = RstStreamFrame(1)
                rst.error_code = 0x8
                s.sendall(rst.serialize())
                STOP.wait(1)
            s.close()
        except OSError:
            STOP.wait(0.2)


def attack_trickle(port):
    while not STOP.is_set():
        try:
            s = connect(port)
            s.sendall(b"POST /open/upload HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n")
            while not STOP.is_set():
                s.sendall(b"a")
                if STOP.wait(5):
                    break
                s.setblocking(False)
                try:
                    if s.recv(1, socket.MSG_PEEK):
                        break  # answered (408): start again
                except BlockingIOError:
                    pass
                s.setblocking(True)
            s.close()
        except OSError:
            STOP.wait(0.2)


def attack_window_zero(port):
    while not STOP.is_set():
        try:
            s = connect(port)
            f = SettingsFrame(0)
            f.settings[SettingsFrame.INITIAL_WINDOW_SIZE] = 0
            enc = hpack.Encoder()
            s.sendall(PREFACE + f.serialize() + b"".join(
                h2_request(enc, 1 + 2 * i, "GET", "/open/download") for i in range(100)))
            while not STOP.is_set():
                s.sendall(PingFrame(0).serialize())
                if not drain(s, 10):
                    break
            s.close()
        except OSError:
            STOP.wait(0.2)


def attack_unauthenticated(port):
    body = b"b" * 16384
    while not STOP.is_set():
        try:
            s = connect(port)
            enc = hpack.Encoder()
            frames = [PREFACE, SettingsFrame(0).serialize()]
            for i in range(100):
                frames.append(h2_request(enc, 1 + 2 * i, "POST", "/api/x",
                                         extra=[("content-length", str((1 << 20) - 1))], end=False))
            s.sendall(b"".join(frames))
            # Send body on every stream until the gateway answers or resets.
            for _ in range(64):
                if STOP.is_set():
                    break
                for i in range(100):
                    d = DataFrame(1 + 2 * i)
                    d.data = body
                    s.sendall(d.serialize())
                if not drain(s, 0.05):
                    break
            drain(s, 1)
            s.close()
        except OSError:
            STOP.wait(0.2)


def legit(port, results):
    import http.client
    conn = None
    while not STOP.is_set():
        start = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=("127.0.0.1", 0))
            conn.request("GET", "/open/hello")
            r = conn.getresponse()
            r.read()
            results.append((time.monotonic() - start, r.status))
        except (OSError, http.client.HTTPException):
            results.append((time.monotonic() - start, 0))
            conn = None
        STOP.wait(0.05)


def main():
    binary = sys.argv[1]
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    up_port, gw_port, admin_port = free_port(), free_port(), free_port()
    server = ThreadedServer(("127.0.0.1", up_port), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="assertgate-soak.")
    device = os.path.join(os.path.dirname(binary), "assertgate-device")
    subprocess.run([device, "init-ca", "--state", work + "/device"], check=True, capture_output=True)
    with open(work + "/gw.yaml", "w") as f:
        f.write("""listeners: [{address: 127.0.0.1:%d}]
admin: {address: 127.0.0.1:%d}
apps: [{appId: ABCDE12345.com.example.app, environments: [development]}]
attestation:
  trustAnchors: [%s/device/ca/root.cert.pem]
  receiptTrustAnchors: [%s/device/ca/receipt-root.cert.pem]
store: {memory: {}}
upstreams: {api: {endpoints: [http://127.0.0.1:%d]}}
routes:
  - {match: {prefix: /api/}, upstream: api, mode: enforce}
  - {match: {prefix: /open/}, upstream: api, mode: passthrough}
logging: {level: error, format: text}
""" % (gw_port, admin_port, work, work, up_port))
    gw = subprocess.Popen([binary, "serve", "--config", work + "/gw.yaml", "--workers", "2"],
                          stdout=subprocess.DEVNULL, stderr=open(work + "/gw.log", "w"))
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", gw_port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    baseline_results = []
    t = threading.Thread(target=legit, args=(gw_port, baseline_results))
    t.start()
    STOP.wait(3)
    STOP.set()
    t.join()
    STOP.clear()
    before = upstream_connections(up_port)
    threads = []
    for i in range(16):
        threads.append(threading.Thread(target=attack_abandon, args=(gw_port, False)))
        threads.append(threading.Thread(target=attack_abandon, args=(gw_port, True)))
    for i in range(150):
        threads.append(threading.Thread(target=attack_trickle, args=(gw_port,)))
    for i in range(2):
        threads.append(threading.Thread(target=attack_window_zero, args=(gw_port,)))
    for i in range(8):
        threads.append(threading.Thread(target=attack_unauthenticated, args=(gw_port,)))
    results = []
    threads.append(threading.Thread(target=legit, args=(gw_port, results)))
    for th in threads:
        th.daemon = True
        th.start()
    peak = 0
    end = time.monotonic() + duration
    while time.monotonic() < end:
        time.sleep(1)
        peak = max(peak, upstream_connections(up_port))
    during = upstream_connections(up_port)
    rss = int([l for l in open("/proc/%d/status" % gw.pid) if l.startswith("VmRSS")][0].split()[1])
    STOP.set()
    for th in threads:
        th.join(timeout=15)
    # Idle keep-alive connections may stay pooled: the baseline is what a
    # quiet gateway keeps, so wait until it is back there (bounded).
    after = upstream_connections(up_port)
    settle_end = time.monotonic() + 90
    while after > max(before, 1) * 2 + 2 and time.monotonic() < settle_end:
        time.sleep(1)
        after = upstream_connections(up_port)
    gw.terminate()
    gw.wait(timeout=30)
    server.shutdown()
    lat = sorted(x for x, _ in results)
    ok = sum(1 for _, s in results if s == 200)

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 1) if lat else None
    print(json.dumps({
        "duration_s": duration, "legit_requests": len(results), "legit_ok": ok,
        "legit_p50_ms": pct(0.50), "legit_p99_ms": pct(0.99), "legit_max_ms": pct(1.0),
        "baseline_p99_ms": round(sorted(x for x, _ in baseline_results)[int(0.99 * len(baseline_results))] * 1000, 1)
        if baseline_results else None,
        "upstream_conns_before": before, "upstream_conns_peak": peak, "upstream_conns_end_of_attack": during,
        "upstream_conns_after": after, "gateway_rss_mib_end_of_attack": round(rss / 1024),
    }))


if __name__ == "__main__":
    main()
