#!/usr/bin/python3
"""POSTs 5 bytes to 127.0.0.1:PORT PATH over h2c with TE: trailers and
request trailers (one plain, two only the gateway may set); prints the body."""
import socket
import sys

import h2.config
import h2.connection
import h2.events

port, path = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
sid = c.get_next_available_stream_id()
c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", f"127.0.0.1:{port}"), (":path", path),
                     ("te", "trailers"), ("content-type", "application/octet-stream")])
c.send_data(sid, b"hello")
c.send_headers(sid, [("x-client-trailer", "1"), ("x-assertgate-trust", "verified"), ("x-forwarded-for", "6.6.6.6")],
               end_stream=True)
s.sendall(c.data_to_send())
body = b""
done = False
while not done:
    data = s.recv(65536)
    if not data:
        break
    for e in c.receive_data(data):
        if isinstance(e, h2.events.DataReceived):
            body += e.data
            c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.StreamEnded) and e.stream_id == sid:
            done = True
        elif isinstance(e, h2.events.StreamReset):
            sys.exit(f"stream reset: {e.error_code}")
    s.sendall(c.data_to_send())
sys.stdout.write(body.decode())
