#!/usr/bin/python3
"""HTTP/1.1 echo server for the HTTP1Client test. Prints "PORT <n>"; exits when
its stdin closes."""
import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        out = json.dumps({
            "method": self.command, "path": self.path, "bodyLength": len(body),
            "bodySha256": hashlib.sha256(body).hexdigest(), "host": self.headers.get("Host"),
            "custom": self.headers.get("X-Custom"),
        }).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = handle_any

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
print("PORT %d" % server.server_address[1], flush=True)
threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
server.serve_forever()
