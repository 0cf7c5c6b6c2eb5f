#!/usr/bin/python3
"""Opens N idle HTTP/2 connections (preface + SETTINGS, then nothing but the
SETTINGS ACK), waits until the server has answered each with its SETTINGS,
reports the server process's RSS, closes them all, waits, reports RSS again.

usage: idle_conns.py PORT PID N ROUNDS [SETTLE_SECONDS]
prints one JSON line per round: {"round", "open_kib", "closed_kib", "baseline_kib"}
"""
import json
import selectors
import socket
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def open_idle(port, n):
    sel = selectors.DefaultSelector()
    socks = []
    for i in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, i)
    sent, answered = set(), set()
    deadline = time.monotonic() + 60
    while len(answered) < n and time.monotonic() < deadline:
        for key, ev in sel.select(timeout=1):
            s = key.fileobj
            if key.data not in sent and ev & selectors.EVENT_WRITE:
                try:
                    s.sendall(PREFACE + SETTINGS + SETTINGS_ACK)
                except OSError:
                    continue
                sent.add(key.data)
                sel.modify(s, selectors.EVENT_READ, key.data)
            elif ev & selectors.EVENT_READ:
                try:
                    if s.recv(65536):
                        answered.add(key.data)
                        sel.unregister(s)
                except OSError:
                    sel.unregister(s)
    sel.close()
    return socks, len(answered)


def main():
    port, pid, n, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    settle = float(sys.argv[5]) if len(sys.argv) > 5 else 3.0
    baseline = rss_kib(pid)
    for r in range(1, rounds + 1):
        socks, ok = open_idle(port, n)
        time.sleep(settle)  # a measurement interval, not synchronisation
        opened = rss_kib(pid)
        for s in socks:
            s.close()
        time.sleep(settle)
        closed = rss_kib(pid)
        print(json.dumps({"round": r, "answered": ok, "baseline_kib": baseline, "open_kib": opened,
                          "closed_kib": closed}), flush=True)


if __name__ == "__main__":
    main()
