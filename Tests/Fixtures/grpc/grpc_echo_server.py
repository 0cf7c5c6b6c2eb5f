#!/usr/bin/env python3
"""The gRPC service behind the gateway in the integration tests (issue #19):
grpcio's own server (its HTTP/2 is gRPC core's chttp2, nothing the project
wrote), serving echo.proto's assertgate.test.Echo.

    grpc_echo_server.py [--port N] [--tls CERT KEY]
                        [--max-connection-age-ms MS] [--max-connection-age-grace-ms MS]

Listens on 127.0.0.1 (port 0, the default, lets the kernel choose), h2c
unless --tls; prints "PORT n" once it accepts calls. With
--max-connection-age-ms the server ends every connection with GOAWAY after
about that long (gRPC adds +-10% jitter), letting calls in flight finish
within the grace period. Exits when its stdin closes (the test holds it
open) or on SIGTERM.
"""
import argparse
import base64
import os
import sys
import threading
from concurrent import futures

import grpc

import echo_codegen

pb2, pb2_grpc = echo_codegen.load()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.say_calls = 0
        self.fail_calls = 0
        self.chat_messages = 0
        self.peers = []
        self.slow_started = []
        self.slow_cancelled = []
        self.slow_completed = []

    def peer(self, context):
        # One entry per connection that carried a call (its client port differs).
        p = context.peer()
        with self.lock:
            if p not in self.peers:
                self.peers.append(p)


def metadata_map(context):
    seen = {}
    for key, value in context.invocation_metadata():
        if isinstance(value, bytes):  # "-bin" keys arrive decoded
            value = base64.b64encode(value).decode()
        seen[key] = seen[key] + "," + value if key in seen else value
    return seen


class Echo(pb2_grpc.EchoServicer):
    def __init__(self, stats):
        self.stats = stats

    def Say(self, request, context):
        self.stats.peer(context)
        with self.stats.lock:
            self.stats.say_calls += 1
        # Trailing metadata on a successful call too: trailers end to end.
        context.set_trailing_metadata((("x-test-trailer", "say"),))
        return pb2.EchoReply(text=request.text, seq=request.seq, seen_metadata=metadata_map(context))

    def Chat(self, request_iterator, context):
        self.stats.peer(context)
        first = True
        for request in request_iterator:
            with self.stats.lock:
                self.stats.chat_messages += 1
            if request.text.startswith("reset"):
                # The server ends the call while the client is still
                # sending: gRPC core answers trailers (grpc-status 1
                # CANCELLED), then RST_STREAM(NO_ERROR) for the request half.
                context.cancel()
                return
            reply = pb2.EchoReply(text=request.text, seq=request.seq)
            if first:
                reply.seen_metadata.update(metadata_map(context))
                first = False
            yield reply

    def Fail(self, request, context):
        self.stats.peer(context)
        with self.stats.lock:
            self.stats.fail_calls += 1
        context.set_trailing_metadata((("x-test-trailer", "yes"),))
        context.abort(grpc.StatusCode(_code(request.seq or 9)), request.text or "failed on purpose")

    def Slow(self, request, context):
        self.stats.peer(context)
        name = request.text
        ended = threading.Event()
        # Runs when the call terminates: here only by cancel or deadline,
        # since the handler has not answered yet.
        context.add_callback(ended.set)
        with self.stats.lock:
            self.stats.slow_started.append(name)
        if ended.wait(request.seq or 30) or not context.is_active():
            with self.stats.lock:
                self.stats.slow_cancelled.append(name)
            return pb2.EchoReply(text=name)
        with self.stats.lock:
            self.stats.slow_completed.append(name)
        return pb2.EchoReply(text=name, seq=request.seq)

    def Stats(self, request, context):
        with self.stats.lock:
            return pb2.StatsReply(
                say_calls=self.stats.say_calls, chat_messages=self.stats.chat_messages,
                fail_calls=self.stats.fail_calls, peers=list(self.stats.peers),
                slow_started=list(self.stats.slow_started), slow_cancelled=list(self.stats.slow_cancelled),
                slow_completed=list(self.stats.slow_completed))


def _code(number):
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code
    return grpc.StatusCode.UNKNOWN


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--max-connection-age-ms", type=int)
    parser.add_argument("--max-connection-age-grace-ms", type=int, default=10_000)
    args = parser.parse_args()

    options = []
    if args.max_connection_age_ms:
        options += [
            ("grpc.max_connection_age_ms", args.max_connection_age_ms),
            ("grpc.max_connection_age_grace_ms", args.max_connection_age_grace_ms),
        ]
    # Enough threads that a test's concurrent calls (load at 8, a few slow
    # calls) never queue behind each other.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=options)
    pb2_grpc.add_EchoServicer_to_server(Echo(Stats()), server)
    address = "127.0.0.1:%d" % args.port
    if args.tls:
        with open(args.tls[0], "rb") as cert, open(args.tls[1], "rb") as key:
            credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise SystemExit("could not listen on " + address)
    server.start()
    print("PORT %d" % port, flush=True)
    sys.stdin.read()  # EOF: the test is done with us (or died)
    server.stop(0)
    os._exit(0)


if __name__ == "__main__":
    main()
