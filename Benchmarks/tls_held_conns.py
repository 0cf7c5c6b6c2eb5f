#!/usr/bin/python3
"""COUNT TLS connections to 127.0.0.1:PORT (ALPN h2), each downloading PATH
once with a 16 MiB window, then held open until a line arrives on standard
input. Prints {"opened": n, "bytes": total} once all are held. Used by
Benchmarks/tls-held-memory.sh.

usage: tls_held_conns.py PORT COUNT PATH
"""
import json
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events
import h2.settings


def download(port, path):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)))
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    c.initiate_connection()
    c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16 << 20})
    c.increment_flow_control_window(16 << 20)
    c.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":authority", "bench"), (":path", path)],
                   end_stream=True)
    s.sendall(c.data_to_send())
    got, done = 0, False
    while not done:
        data = s.recv(1 << 20)
        if not data:
            break
        for event in c.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                got += len(event.data)
                c.acknowledge_received_data(event.flow_controlled_length, 1)
            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        out = c.data_to_send()
        if out:
            s.sendall(out)
    return s, got


if __name__ == "__main__":
    port, count, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    held, total = [], 0
    for _ in range(count):
        s, got = download(port, path)
        held.append(s)
        total += got
    print(json.dumps({"opened": len(held), "bytes": total}), flush=True)
    sys.stdin.readline()
    for s in held:
        s.close()
