#!/usr/bin/env python3
"""An HTTPS upstream (HTTP/1.1, keep-alive) for the gateway's integration tests.

    https_upstream.py CERT KEY [CLIENT_CA]

Listens on a free 127.0.0.1 port and prints "PORT n". `GET /close-delimited`
answers 100,000 bytes delimited by the close, without close_notify
(`?notify=1`: with it); `POST /stall` never reads its body. With CLIENT_CA it
requires a client certificate that CA signed. Every other request is answered 200
with JSON: the method, the path, the headers as received (names lower-cased),
the common name of the client certificate (null without one) and the number
of the connection it came on (1, 2, ... in accept order). Exits when
its stdin closes. Python's http.server and ssl module: an HTTP server and a
TLS layer other than the gateway's (ssl drives the same OpenSSL library).
"""
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


connections = 0
connections_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        # One handler per connection: number them, so tests can see reuse.
        global connections
        with connections_lock:
            connections += 1
            self.connection_number = connections
        super().setup()

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/close-delimited"):
            self.close_delimited(notify="notify=1" in self.path)
        else:
            self.answer()

    def do_POST(self):
        if self.path == "/stall":
            time.sleep(3600)  # never reads the body: the gateway's writes back up
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.answer()

    def close_delimited(self, notify):
        """A body that ends with the connection, with or without close_notify."""
        self.close_connection = True
        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n")
        self.wfile.write(b"y" * 100_000)
        self.wfile.flush()
        if notify:
            self.connection.unwrap()  # sends close_notify; Python's close() alone does not

    def answer(self):
        common_name = None
        for rdn in (self.connection.getpeercert() or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    common_name = value
        body = json.dumps({
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "clientCN": common_name,
            "connection": self.connection_number,
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a refused handshake is part of the tests


def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1], sys.argv[2])
    if len(sys.argv) > 3:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(sys.argv[3])
    server = Server(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    os._exit(0)


if __name__ == "__main__":
    main()
