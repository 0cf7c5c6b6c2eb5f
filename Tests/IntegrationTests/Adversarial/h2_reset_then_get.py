#!/usr/bin/python3
"""On ONE HTTP/2 connection: GET SLOW_PATH, reset that stream after RESET_AFTER
seconds, wait PAUSE seconds, then GET NEXT_PATH and print "<status> <body>" of it.

usage: h2_reset_then_get.py PORT SLOW_PATH RESET_AFTER PAUSE NEXT_PATH
"""
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events


def main():
    port, slow, reset_after, pause, nxt = (int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4]),
                                           sys.argv[5])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    hdrs = lambda p: [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"), (":path", p)]
    first = conn.get_next_available_stream_id()
    conn.send_headers(first, hdrs(slow), end_stream=True)
    sock.sendall(conn.data_to_send())
    time.sleep(reset_after)
    conn.reset_stream(first, error_code=h2.errors.ErrorCodes.CANCEL)
    sock.sendall(conn.data_to_send())
    time.sleep(pause)
    second = conn.get_next_available_stream_id()
    conn.send_headers(second, hdrs(nxt), end_stream=True)
    sock.sendall(conn.data_to_send())
    status, body = None, b""
    while True:
        data = sock.recv(65536)
        if not data:
            print("connection closed")
            return 1
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == second:
                status = dict(ev.headers).get(":status")
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.stream_id == second:
                    body += ev.data
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)) and ev.stream_id == second:
                sys.stdout.write(f"{status} {body.decode()}")
                return 0
        sock.sendall(conn.data_to_send())


if __name__ == "__main__":
    sys.exit(main())
