#!/usr/bin/env python3
"""Demo "legacy API" for the quickstart: an HTTP/1.1 keep-alive server on
loopback that answers every request with a JSON echo of what it received
(method, path, headers, body size), so you can see the trust headers
AssertGate adds. Not for production.

Under /api/promo/ it also plays a promotion that each device gets once,
remembered in DeviceCheck's bit 0 (devicecheck.md): when the gateway says
the device's token is valid (X-AssertGate-Device: valid) and its bits are
unset or bit0=0 (X-AssertGate-Device-Bits), the answer grants the offer and
carries X-AssertGate-Set-Device-Bits: bit0=1, which the gateway takes off
the response and delivers to Apple; with bit0=1 the offer was already
claimed. The JSON says which ("offer") and what it asked the gateway to set
("setDeviceBits"), since the app never sees that header."""
import hashlib
import json
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROMO_PREFIX = "/api/promo/"


def promo(headers):
    """(offer, bits to set or None) for a request under PROMO_PREFIX."""
    if headers.get("X-AssertGate-Device") != "valid":
        return "no-valid-device-token", None
    bits = headers.get("X-AssertGate-Device-Bits") or ""
    if bits == "unset":
        return "granted", "bit0=1"
    fields = dict(part.split("=", 1) for part in bits.split(", ") if "=" in part)
    if fields.get("bit0") == "0":
        return "granted", "bit0=1"
    if fields.get("bit0") == "1":
        return "already-claimed", None
    return "no-device-bits", None


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "demo-upstream"

    def setup(self):
        super().setup()
        # Headers and body leave in two writes: without this, Nagle holds the
        # body until the gateway's delayed ACK (~40 ms per response).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        payload = {
            "method": self.command,
            "path": self.path,
            "headers": {k: v for k, v in self.headers.items()},
            "bodyBytes": len(body),
            "bodySha256": hashlib.sha256(body).hexdigest(),
        }
        set_bits = None
        if self.path.startswith(PROMO_PREFIX):
            payload["offer"], set_bits = promo(self.headers)
            payload["setDeviceBits"] = set_bits
        out = (json.dumps(payload, indent=2) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        if set_bits:
            self.send_header("X-AssertGate-Set-Device-Bits", set_bits)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle

    def log_message(self, fmt, *args):
        pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9001
    ThreadingHTTPServer(("127.0.0.1", port), Echo).serve_forever()


if __name__ == "__main__":
    main()
