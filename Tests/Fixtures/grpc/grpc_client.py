#!/usr/bin/env python3
"""A real gRPC client (grpcio) for the integration tests: one call pattern per
mode, one JSON line of results on stdout. Exit status 0 whenever it could
report (a failed call is a result, not an error).

    grpc_client.py MODE --target HOST:PORT [--tls-ca PEM [--server-name NAME]]
                   [--metadata k=v]... [--timeout SECONDS] [mode options]

Modes:
  unary       one call of --method (Say, Fail, Slow; default Say) with --text/--seq:
              code, details, initial and trailing metadata, the reply.
  chat        --count N bidirectional messages of --size bytes, at most
              --window unanswered at a time (so a proxy that held the request
              stream back would stall it); every reply checked in order.
              --reset-at K: message K asks the server to end the call there.
              --pause-after K --pause-ms P: nothing sent for P ms after message
              K (replies to what was sent still come; then both ways are quiet).
  load        --seconds S of Say calls from --concurrency C threads: ok and
              failed counts, failed codes.
  cancel      starts Slow as --text, waits until the server (asked directly at
              --stats-target) has it running, cancels it, then waits until the
              server saw the cancel.
  stats       the server's Stats.
  print-body  hex of the serialized EchoRequest(--text, --seq): what a gRPC
              request body carries after its 5-byte frame header.
"""
import argparse
import json
import threading
import time

import grpc

import echo_codegen

pb2, pb2_grpc = echo_codegen.load()

# No proxy from the environment: every call goes to the target as given.
CHANNEL_OPTIONS = [("grpc.enable_http_proxy", 0)]


def channel(target, args):
    if args.tls_ca:
        with open(args.tls_ca, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        options = list(CHANNEL_OPTIONS)
        if args.server_name:
            options.append(("grpc.ssl_target_name_override", args.server_name))
        return grpc.secure_channel(target, credentials, options=options)
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def metadata_dict(pairs):
    out = {}
    for key, value in pairs or ():
        if isinstance(value, bytes):
            value = value.hex()
        out[key] = out[key] + "," + value if key in out else value
    return out


def status(call_or_error):
    code = call_or_error.code()
    return {"code": code.name, "codeNumber": code.value[0], "details": call_or_error.details() or ""}


def reply_dict(reply):
    if reply is None:
        return None
    return {"text": reply.text, "seq": reply.seq, "seenMetadata": dict(reply.seen_metadata)}


def unary(stub, args, metadata):
    method = getattr(stub, args.method)
    request = pb2.EchoRequest(text=args.text, seq=args.seq)
    started = time.monotonic()
    try:
        reply, call = method.with_call(request, metadata=metadata, timeout=args.timeout)
        result = status(call)
        result.update(initialMetadata=metadata_dict(call.initial_metadata()),
                      trailingMetadata=metadata_dict(call.trailing_metadata()), reply=reply_dict(reply))
    except grpc.RpcError as e:
        result = status(e)
        result.update(initialMetadata=metadata_dict(e.initial_metadata()),
                      trailingMetadata=metadata_dict(e.trailing_metadata()), reply=None)
    result["elapsedMs"] = round((time.monotonic() - started) * 1000)
    return result


def chat_text(i, size, reset_at=-1):
    if i == reset_at:
        return "reset"
    head = "m%d:" % i
    return head + "x" * max(0, size - len(head))


def chat(stub, args, metadata):
    window = threading.Semaphore(args.window)
    done = threading.Event()
    sent = [0]

    def requests():
        for i in range(args.count):
            # Wait for a slot; give up if the call already ended.
            while not window.acquire(timeout=0.2):
                if done.is_set():
                    return
            sent[0] += 1
            yield pb2.EchoRequest(text=chat_text(i, args.size, args.reset_at), seq=i)
            if i == args.pause_after:
                # The scenario, not a wait: an app that has nothing to say for a while.
                time.sleep(args.pause_ms / 1000)

    started = time.monotonic()
    received = 0
    mismatch = None
    seen = {}
    call = stub.Chat(requests(), metadata=metadata, timeout=args.timeout)
    try:
        for reply in call:
            if received == 0:
                seen = dict(reply.seen_metadata)
            if mismatch is None and (reply.seq != received or reply.text != chat_text(received, args.size)):
                mismatch = {"index": received, "seq": reply.seq, "textPrefix": reply.text[:16]}
            received += 1
            window.release()
        result = status(call)
        result["trailingMetadata"] = metadata_dict(call.trailing_metadata())
    except grpc.RpcError as e:
        result = status(e)
        result["trailingMetadata"] = metadata_dict(e.trailing_metadata())
    done.set()
    result.update(sent=sent[0], received=received, inOrder=mismatch is None and received == args.count,
                  firstMismatch=mismatch, seenMetadata=seen, elapsedMs=round((time.monotonic() - started) * 1000))
    return result


def load(stub, args, metadata):
    end = time.monotonic() + args.seconds
    lock = threading.Lock()
    counts = {"ok": 0, "failed": 0}
    failed_codes = {}
    failed_details = []

    def worker(n):
        i = 0
        while time.monotonic() < end:
            i += 1
            try:
                reply = stub.Say(pb2.EchoRequest(text="w%d-%d" % (n, i), seq=i), metadata=metadata, timeout=args.timeout or 10)
                good = reply.text == "w%d-%d" % (n, i) and reply.seq == i
                with lock:
                    counts["ok" if good else "failed"] += 1
                    if not good:
                        failed_codes["WRONG_REPLY"] = failed_codes.get("WRONG_REPLY", 0) + 1
            except grpc.RpcError as e:
                with lock:
                    counts["failed"] += 1
                    failed_codes[e.code().name] = failed_codes.get(e.code().name, 0) + 1
                    if len(failed_details) < 5:
                        failed_details.append(e.details() or "")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"ok": counts["ok"], "failed": counts["failed"], "failedCodes": failed_codes,
            "failedDetails": failed_details, "seconds": args.seconds, "concurrency": args.concurrency}


def wait_for(condition, seconds):
    """Polls a condition on the server (an external process) under a deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def cancel(stub, args, metadata):
    if not args.stats_target:
        raise SystemExit("cancel needs --stats-target (the server itself)")
    stats = pb2_grpc.EchoStub(grpc.insecure_channel(args.stats_target, options=CHANNEL_OPTIONS))
    name = args.text
    future = stub.Slow.future(pb2.EchoRequest(text=name, seq=args.seq or 60), metadata=metadata, timeout=args.timeout)
    started = wait_for(lambda: name in stats.Stats(pb2.StatsRequest()).slow_started, 10)
    cancelled_at = time.monotonic()
    future.cancel()
    code = None
    try:
        future.result()
        code = "OK"
    except grpc.FutureCancelledError:
        code = "CANCELLED"
    except grpc.RpcError as e:
        code = e.code().name
    saw = wait_for(lambda: name in stats.Stats(pb2.StatsRequest()).slow_cancelled, 10)
    final = stats.Stats(pb2.StatsRequest())
    return {"started": started, "clientCode": code, "serverSawCancel": saw,
            "serverCompleted": name in final.slow_completed,
            "msToServerCancel": round((time.monotonic() - cancelled_at) * 1000)}


def stats_mode(stub, args, metadata):
    s = stub.Stats(pb2.StatsRequest(), timeout=args.timeout or 10)
    return {"sayCalls": s.say_calls, "chatMessages": s.chat_messages, "failCalls": s.fail_calls,
            "peers": list(s.peers), "slowStarted": list(s.slow_started),
            "slowCancelled": list(s.slow_cancelled), "slowCompleted": list(s.slow_completed)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["unary", "chat", "load", "cancel", "stats", "print-body"])
    parser.add_argument("--target")
    parser.add_argument("--tls-ca")
    parser.add_argument("--server-name")
    parser.add_argument("--metadata", action="append", default=[], help="k=v, repeatable")
    parser.add_argument("--timeout", type=float, help="the call's deadline in seconds")
    parser.add_argument("--method", default="Say", choices=["Say", "Fail", "Slow"])
    parser.add_argument("--text", default="hello")
    parser.add_argument("--seq", type=int, default=0)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--stats-target")
    parser.add_argument("--pause-after", type=int, default=-1,
                        help="chat: after sending message K, send nothing for --pause-ms")
    parser.add_argument("--pause-ms", type=int, default=0)
    parser.add_argument("--reset-at", type=int, default=-1,
                        help="chat: message N asks the server to cancel the call there")
    args = parser.parse_args()

    if args.mode == "print-body":
        message = pb2.EchoRequest(text=args.text, seq=args.seq).SerializeToString()
        print(json.dumps({"message": message.hex()}), flush=True)
        return
    if not args.target:
        raise SystemExit("--target is required")
    metadata = []
    for pair in args.metadata:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit("--metadata wants k=v: " + pair)
        metadata.append((key.lower(), value))
    stub = pb2_grpc.EchoStub(channel(args.target, args))
    run = {"unary": unary, "chat": chat, "load": load, "cancel": cancel, "stats": stats_mode}[args.mode]
    print(json.dumps(run(stub, args, metadata)), flush=True)


if __name__ == "__main__":
    main()
