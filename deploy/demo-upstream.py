#!/usr/bin/env python3
"""Demo "legacy API" for the quickstart: an HTTP/1.1 keep-alive server on
loopback that answers every request with a JSON echo of what it received
(method, path, headers, body size), so you can see the trust headers
AssertGate adds. Not for production."""
import hashlib
import json
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
        out = (json.dumps(payload, indent=2) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
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
