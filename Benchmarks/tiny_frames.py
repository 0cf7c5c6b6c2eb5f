#!/usr/bin/python3
"""One HTTP/2 upload of COUNT DATA frames of SIZE bytes each (prior
knowledge, POST PATH), flow control honoured, to a proxy on 127.0.0.1:PORT.
Prints {"status": ..., "frames": ..., "seconds": ...}. Used by
Benchmarks/tiny-frames.sh: what a client sending its body a byte a frame
costs a proxy, beside the same bytes in large frames.

usage: tiny_frames.py PORT COUNT SIZE [PATH]
"""
import json
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings


def upload(port, count, size, path):
    s = socket.create_connection(("127.0.0.1", port))
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    c.initiate_connection()
    s.sendall(c.data_to_send())
    c.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":authority", "bench"), (":path", path),
                       ("content-length", str(count * size))])
    chunk, sent, status, done = b"a" * size, 0, None, False
    start = time.monotonic()
    while not done:
        # Up to a thousand frames a turn while the windows allow, then read.
        for _ in range(1000):
            if sent == count or c.local_flow_control_window(1) < size:
                break
            sent += 1
            c.send_data(1, chunk, end_stream=sent == count)
        out = c.data_to_send()
        if out:
            s.sendall(out)
        can_send = sent < count and c.local_flow_control_window(1) >= size
        s.settimeout(0.0005 if can_send else 30)
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        for event in c.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                status = dict(event.headers).get(":status")
            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        out = c.data_to_send()
        if out:
            s.sendall(out)
    s.close()
    return {"status": status, "frames": sent, "seconds": round(time.monotonic() - start, 3)}


if __name__ == "__main__":
    port, count, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps(upload(port, count, size, sys.argv[4] if len(sys.argv) > 4 else "/upload")))
