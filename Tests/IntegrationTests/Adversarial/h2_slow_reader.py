#!/usr/bin/python3
"""Starts a large download over HTTP/2, takes about 1 MiB, then stops reading and
stops granting flow-control window for HOLD seconds (a slow/stalled client).
The gateway must pause its upstream instead of buffering the rest.

usage: h2_slow_reader.py PORT PATH HOLD_SECONDS
prints "received <bytes>" and exits 0 when the download was cut short as planned.
"""
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events


def main():
    port, path, hold = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"), (":path", path)],
                      end_stream=True)
    sock.sendall(conn.data_to_send())
    received = 0
    while received < (1 << 20):
        data = sock.recv(65536)
        if not data:
            print("closed early")
            return 1
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                received += len(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        sock.sendall(conn.data_to_send())
    # Stall: no reads, no WINDOW_UPDATE.
    time.sleep(hold)
    print(f"received {received}")
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
