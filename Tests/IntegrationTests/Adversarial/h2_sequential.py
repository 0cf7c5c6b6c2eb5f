#!/usr/bin/python3
"""GETs each PATH one after another on ONE HTTP/2 connection (curl 7.88 cannot
reuse an h2c prior-knowledge connection). Prints "<status> <body>" per request.

usage: h2_sequential.py PORT PATH...
"""
import socket
import sys

import h2.config
import h2.connection
import h2.events


def main():
    port, paths = int(sys.argv[1]), sys.argv[2:]
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    for path in paths:
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"),
                                (":path", path)], end_stream=True)
        sock.sendall(conn.data_to_send())
        status, body, done = None, b"", False
        while not done:
            data = sock.recv(65536)
            if not data:
                print("connection closed")
                return 1
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    status = dict(ev.headers).get(":status")
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    body += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)) and ev.stream_id == sid:
                    done = True
            sock.sendall(conn.data_to_send())
        sys.stdout.write(f"{status} {body.decode()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
