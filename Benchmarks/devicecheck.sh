#!/usr/bin/env bash
# DeviceCheck on routes (issue 17, BENCHMARKS.md §8): what a `deviceCheck:
# query` route adds to a request's latency, how fast the bit-update queue
# drains to Apple, and what one Set-Device-Bits answer costs in store writes.
set -u
usage() {
  cat <<'EOF'
Usage: Benchmarks/devicecheck.sh [options]

Self-contained: starts redis-server, nginx (the upstream), the Apple mock
(`assertgate-device apple-mock`, with a throw-away CA, server certificate and
P-256 .p8 key made by openssl) and the gateway (release build,
`assertgate serve --workers 1`) on free 127.0.0.1 ports; removes them on exit.

Part 1, latency (same run, modes alternated each round, paced with --rate,
assertions signed ahead, a fresh mock device token per request):
  a  /api/  asserted, no deviceCheck                      (the anchor)
  b  /dc/   asserted, deviceCheck: query, mock at --latency-ms
  c  /dc/   asserted, deviceCheck: query, mock at 0 ms
  With --store-delay-ms D > 0, the same three again through a second gateway
  whose Redis connection goes through a proxy delaying every reply by D ms,
  so the assertion's own check takes ≈ D: serial work would add D + latency,
  parallel work max(D, latency).
Part 2, update queue: --updates N requests on a `fallback: device` route
  whose upstream answers `X-AssertGate-Set-Device-Bits: bit0=1` (N updates
  queued), then the time until the queue (ZCARD) is empty and the mock has
  received all N; for each latency of the mock's update_two_bits in
  --queue-latencies (validate answers at once).
Part 3, store writes: `redis-cli MONITOR` around one asserted request without
  deviceCheck, one to a query route, and one to a query route whose upstream
  answers Set-Device-Bits (the key's record cached by a request before).

Options:
  --rounds N            rounds of part 1 (default 3)
  --duration S          measured seconds per part-1 run (default 6)
  --rate R              requests/s in part 1 (default 40; 1 connection x 4 streams)
  --latency-ms MS       the mock's latency in mode b (default 50)
  --store-delay-ms D    also run part 1 with Redis replies delayed by D ms (default 20; 0 = skip)
  --updates N           updates queued in part 2, at most 4000 (default 2000)
  --queue-latencies L   mock latencies for part 2, e.g. "0 50" (default "0 50")
  --skip PARTS          e.g. "2 3"
  --keep                keep the work directory (logs, raw JSON)
  -h, --help            this text

Build first: swift build -c release --product assertgate --product assertgate-device
EOF
}
ROUNDS=3; DURATION=6; RATE=40; LAT=50; SDELAY=20; UPDATES=2000; QLATS="0 50"; SKIP=""; KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --latency-ms) LAT=$2; shift 2 ;;
    --store-delay-ms) SDELAY=$2; shift 2 ;;
    --updates) UPDATES=$2; shift 2 ;;
    --queue-latencies) QLATS=$2; shift 2 ;;
    --skip) SKIP=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$UPDATES" -ge 1 ] && [ "$UPDATES" -le 4000 ] || { echo "--updates: 1 to 4000 (the mock logs its newest 10,000 requests)" >&2; exit 2; }
skipped() { case " $SKIP " in *" $1 "*) return 0 ;; esac; return 1; }

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)"
GW="$BIN/assertgate"; DEV="$BIN/assertgate-device"
[ -x "$GW" ] && [ -x "$DEV" ] || { echo "build first: swift build -c release --product assertgate --product assertgate-device" >&2; exit 2; }
for tool in redis-server redis-cli nginx openssl curl python3; do
  command -v $tool >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
WORK="$(mktemp -d /tmp/assertgate-devicecheck.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ $KEEP = 1 ]; then echo "kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
UP=$(free_port); RP=$(free_port); DP=$(free_port)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(cd "$ROOT" && git rev-parse --short HEAD), work $WORK"
echo "# $0 --rounds $ROUNDS --duration $DURATION --rate $RATE --latency-ms $LAT --store-delay-ms $SDELAY --updates $UPDATES --queue-latencies \"$QLATS\""

# --- PKI: the mock's CA and certificate, the DeviceCheck .p8 key and its public half.
PKI="$WORK/pki"; mkdir -p "$PKI"
EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2)
openssl req -x509 "${EC[@]}" -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=AssertGate bench Apple CA" 2>/dev/null
openssl req -x509 -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" "${EC[@]}" -keyout "$PKI/server.key" -out "$PKI/server.crt" \
  -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/AuthKey_XYZ1234567.p8" 2>/dev/null
openssl pkey -in "$PKI/AuthKey_XYZ1234567.p8" -pubout -out "$PKI/AuthKey.pub.pem" 2>/dev/null
[ -s "$PKI/AuthKey.pub.pem" ] && [ -s "$PKI/server.crt" ] || { echo "openssl failed" >&2; exit 1; }

# --- Upstream: nginx; /bits/ and /promo/ answer Set-Device-Bits.
. "$ROOT/Benchmarks/nginx-upstream.sh"
nginx_upstream_conf "$WORK/nginx" "$UP" "location /bits/ { add_header X-AssertGate-Set-Device-Bits \"bit0=1\" always; default_type application/json; return 200 '{\"ok\":true}\\n'; }
        location /promo/ { add_header X-AssertGate-Set-Device-Bits \"bit0=1\" always; default_type application/json; return 200 '{\"ok\":true}\\n'; }
        location / { default_type application/json; return 200 '{\"ok\":true}\\n'; }"
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' & pids+=($!)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --logfile "$WORK/redis.log" & pids+=($!)

# --- Redis behind a proxy that delays every reply by SDELAY ms (part 1, second gateway).
if [ "$SDELAY" != 0 ] && ! skipped 1; then
  python3 - "$DP" "$RP" "$SDELAY" >"$WORK/delay-proxy.log" 2>&1 <<'PY' & pids+=($!)
import asyncio, sys
listen, target, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000
async def pipe(reader, writer, delayed):
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if delayed:  # in order: every chunk leaves `delay` after it arrived
                loop.call_at(loop.time() + delay, writer.write, data)
            else:
                writer.write(data)
    except (ConnectionError, OSError):
        pass
    finally:
        if delayed:
            await asyncio.sleep(delay)
        writer.close()
async def handle(creader, cwriter):
    rreader, rwriter = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(creader, rwriter, False), pipe(rreader, cwriter, True))
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("delay proxy ready", flush=True)
    await server.serve_forever()
asyncio.run(main())
PY
fi

# --- The Apple mock (port 0: it prints the one it got).
"$DEV" apple-mock --port 0 --cert "$PKI/server.crt" --key "$PKI/server.key" \
  --jwt-public-key "$PKI/AuthKey.pub.pem" >"$WORK/mock.out" 2>"$WORK/mock.err" & pids+=($!)
for _ in $(seq 100); do grep -q 'listening on' "$WORK/mock.out" 2>/dev/null && break; sleep 0.1; done
MOCK=$(sed -n 's/^apple-mock listening on \(https:[^ ]*\)$/\1/p' "$WORK/mock.out")
[ -n "$MOCK" ] || { echo "the mock did not start: $(cat "$WORK/mock.err")" >&2; exit 1; }
mock() { curl -sf --cacert "$PKI/ca.crt" "$@"; }
mock_latency() { mock -X POST "$MOCK/mock/latency?endpoint=${2:-all}&ms=$1" >/dev/null; }
mock_updates() { mock "$MOCK/mock/requests" | grep -c '^update_two_bits 200' || true; }

"$DEV" init-ca --state "$WORK/device" >/dev/null 2>&1

# --- The gateway's config: $1 store port, $2 gateway port, $3 admin port.
gw_config() {
  cat <<YAML
listeners: [{address: 127.0.0.1:$2}]
admin: {address: 127.0.0.1:$3}
apps: [{appId: ABCDE12345.com.example.app, environments: [development]}]
attestation:
  trustAnchors: [$WORK/device/ca/root.cert.pem]
  receiptTrustAnchors: [$WORK/device/ca/receipt-root.cert.pem]
  challengeRate: {perSecond: 100000, burst: 100000}
store: {redis: {url: "redis://127.0.0.1:$1/0", commandTimeout: 2s}}
upstreams: {api: {endpoints: [http://127.0.0.1:$UP]}}
deviceCheck:
  {teamId: ABCDE12345, keyId: XYZ1234567, privateKey: {file: $PKI/AuthKey_XYZ1234567.p8},
   baseURL: "$MOCK", developmentBaseURL: "$MOCK", caFile: $PKI/ca.crt, timeout: 2s, updateRetryFor: 1h}
routes:
  - {match: {prefix: /api/}, upstream: api, mode: enforce}
  - {match: {prefix: /dc/}, upstream: api, mode: enforce, deviceCheck: query}
  - {match: {prefix: /bits/}, upstream: api, mode: enforce, deviceCheck: query}
  - {match: {prefix: /promo/}, upstream: api, mode: enforce, deviceCheck: validate, fallback: device}
logging: {level: warning, format: text}
YAML
}
GWPID=""
start_gateway() {  # $1 store port; sets GP, AP, GWPID
  GP=$(free_port); AP=$(free_port)
  gw_config "$1" "$GP" "$AP" >"$WORK/gw-$GP.yaml"
  "$GW" serve --config "$WORK/gw-$GP.yaml" --workers 1 >"$WORK/gw-$GP.log" 2>&1 & GWPID=$!; pids+=($GWPID)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$AP/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "the gateway did not become ready: $(tail -5 "$WORK/gw-$GP.log")" >&2; exit 1
}
stop_gateway() { kill -TERM "$GWPID" 2>/dev/null; wait "$GWPID" 2>/dev/null; }

# --- Part 1: latency.
part1() {  # $1 label, $2 store port
  start_gateway "$2"
  local out="$WORK/part1-$1.tsv"; : >"$out"
  for i in $(seq "$ROUNDS"); do for m in a b c; do
    case $m in a) P=/api/x; T=(); mock_latency 0 ;; b) P=/dc/x; T=(--device-tokens --device-prefix "r$i$m"); mock_latency "$LAT" ;;
               c) P=/dc/x; T=(--device-tokens --device-prefix "r$i$m"); mock_latency 0 ;; esac
    "$DEV" load --gateway "http://127.0.0.1:$GP" --state "$WORK/device" --path "$P" "${T[@]}" \
      --connections 1 --streams 4 --rate "$RATE" --presign --duration "$DURATION" --warmup 1 --threads 1 --json \
      >"$WORK/run-$1-$i$m.json" 2>>"$WORK/load.err"
    python3 - "$WORK/run-$1-$i$m.json" "$i" "$m" >>"$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); l = r["latencyMs"]
bad = r["requests"] - r["successes"]
print(sys.argv[2], sys.argv[3], r["requests"], bad, l["p50"], l["p90"], l["p99"], json.dumps(r["failures"]) if bad else "", sep="\t")
PY
  done; done
  stop_gateway
  python3 - "$out" "$1" "$LAT" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
label, lat = sys.argv[2], float(sys.argv[3])
print(f"\n## part 1 ({label}): p50 / p90 / p99 ms per round (requests, failures)")
by = {}
for rnd, m, n, bad, p50, p90, p99, fails in rows:
    by.setdefault(m, []).append(float(p50))
    print(f"round {rnd} {m}: {float(p50):.2f} / {float(p90):.2f} / {float(p99):.2f}  ({n}, {bad}) {fails}")
med = {m: statistics.median(v) for m, v in by.items()}
print(f"median p50: a {med['a']:.2f}  b {med['b']:.2f}  c {med['c']:.2f} ms")
diffs = [float(b[4]) - float(a[4]) for a, b in zip([r for r in rows if r[1] == 'a'], [r for r in rows if r[1] == 'b'])]
diffc = [float(c[4]) - float(a[4]) for a, c in zip([r for r in rows if r[1] == 'a'], [r for r in rows if r[1] == 'c'])]
print(f"added by deviceCheck (b - a), per round: {', '.join(f'{d:.2f}' for d in diffs)}; median {statistics.median(diffs):.2f} ms "
      f"= {statistics.median(diffs) / lat:.3f} x the mock's {lat:g} ms" if lat else "")
print(f"added with the mock at 0 ms (c - a), per round: {', '.join(f'{d:.2f}' for d in diffc)}; median {statistics.median(diffc):.2f} ms")
print(f"serial would be a + {lat:g} + (c - a) = {med['a'] + lat + statistics.median(diffc):.2f} ms; measured b {med['b']:.2f} ms")
PY
}
if ! skipped 1; then
  part1 "redis direct" "$RP"
  if [ "$SDELAY" != 0 ]; then
    grep -q ready "$WORK/delay-proxy.log" || sleep 1
    echo "(store replies delayed by $SDELAY ms through the proxy)"
    part1 "store +${SDELAY}ms" "$DP"
  fi
fi

# --- Part 2: the update queue's throughput.
if ! skipped 2; then
  echo; echo "## part 2: update queue, $UPDATES updates (DeviceBitUpdater: poll every 250 ms, batch 32, deliveries of a batch in parallel)"
  for QL in $QLATS; do
    start_gateway "$RP"
    mock -X POST "$MOCK/mock/reset" >/dev/null; mock_latency "$QL" update_two_bits
    redis-cli -p "$RP" DEL 'ag:{dbq}:due' 'ag:{dbq}:upd' 'ag:{dbq}:att' >/dev/null
    T0=$(date +%s.%N)
    "$DEV" load --gateway "http://127.0.0.1:$GP" --passthrough --path /promo/x --device-tokens --device-prefix "q$QL" \
      --connections 1 --streams 8 --requests "$UPDATES" --threads 1 --json >"$WORK/queue-$QL.json" 2>>"$WORK/load.err"
    T1=$(date +%s.%N)
    D1=$(redis-cli -p "$RP" ZCARD 'ag:{dbq}:due'); C1=$(mock_updates)
    # Poll the queue's depth until it is empty (a measurement, not synchronisation).
    : >"$WORK/queue-$QL.depth"
    while :; do
      D=$(redis-cli -p "$RP" ZCARD 'ag:{dbq}:due'); NOW=$(date +%s.%N)
      echo "$NOW $D" >>"$WORK/queue-$QL.depth"
      [ "$D" = 0 ] && break
      python3 -c "import sys; sys.exit(0 if float('$NOW') - float('$T1') < 300 else 1)" || { echo "queue not empty after 300 s" >&2; break; }
      sleep 0.05
    done
    T2=$NOW; C2=$(mock_updates)
    python3 - "$WORK/queue-$QL.json" "$UPDATES" "$QL" "$T0" "$T1" "$T2" "$D1" "$C1" "$C2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, ql = int(sys.argv[2]), sys.argv[3]
t0, t1, t2 = map(float, sys.argv[4:7]); d1, c1, c2 = map(int, sys.argv[7:10])
print(f"mock {ql} ms: {r['successes']}/{r['requests']} requests ok at {r['requestsPerSecond']:.0f} req/s ({t1 - t0:.2f} s); "
      f"then {d1} queued, {c1} delivered; queue empty {t2 - t1:.2f} s later, mock received {c2} updates")
print(f"  drain: {d1} updates in {t2 - t1:.2f} s = {d1 / (t2 - t1):.1f} updates/s;  all {c2} in {t2 - t0:.2f} s from the first request = {c2 / (t2 - t0):.1f} updates/s")
import math
ticks = max(1, math.ceil((float(ql) + 5) / 250))  # a tick is skipped while the last batch is still out
print(f"  bound: 32 per batch, a batch every {ticks} x 250 ms (ticks are skipped while a batch is out) = {32 / (ticks * 0.25):.0f} updates/s")
PY
    curl -s "http://127.0.0.1:$AP/metrics" | grep -E '^assertgate_devicecheck_calls_total\{call="update"' | sed 's/^/  /'
    stop_gateway
  done
fi

# --- Part 3: store writes of one request with and without Set-Device-Bits.
if ! skipped 3; then
  echo; echo "## part 3: Redis commands around one asserted request (MONITOR)"
  start_gateway "$RP"
  mock -X POST "$MOCK/mock/reset" >/dev/null; mock_latency 0
  "$DEV" attest --gateway "http://127.0.0.1:$GP" --state "$WORK/device" >/dev/null 2>>"$WORK/load.err"
  # The key's record is read once and then cached: a first request without deviceCheck warms it.
  "$DEV" request --gateway "http://127.0.0.1:$GP" --state "$WORK/device" GET /api/warm >"$WORK/part3-warm.out" 2>&1
  redis-cli -p "$RP" MONITOR >"$WORK/monitor.txt" & MONPID=$!; pids+=($MONPID)
  redis-cli -p "$RP" ECHO mark-start >/dev/null
  for P in /api/zero /dc/one /bits/two; do
    redis-cli -p "$RP" ECHO "mark-before $P" >/dev/null
    TOKEN=$("$DEV" device-token --device "part3-${P//\//}")
    "$DEV" request --gateway "http://127.0.0.1:$GP" --state "$WORK/device" --header "AssertGate-Device-Token: $TOKEN" GET "$P" \
      >"$WORK/part3$(echo $P | tr / -).out" 2>&1
    redis-cli -p "$RP" ECHO "mark-after $P" >/dev/null
  done
  for _ in $(seq 100); do [ "$(mock_updates)" -ge 1 ] && [ "$(redis-cli -p "$RP" ZCARD 'ag:{dbq}:due')" = 0 ] && break; sleep 0.1; done
  redis-cli -p "$RP" ECHO mark-end >/dev/null
  kill $MONPID 2>/dev/null; wait $MONPID 2>/dev/null
  python3 - "$WORK/monitor.txt" <<'PY'
import re, shlex, sys
# Each window: from an ECHO before the request to one after its response.
# Request path vs the DeviceBitUpdater's background work (a claim and a
# ZCARD every 250 ms, an ack per delivered update), told apart by shape.
section = None; counts = {}
for line in open(sys.argv[1]):
    m = re.match(r'^\S+ \[(\d+) ([^\]]+)\] (.*)$', line.strip())
    if not m or m.group(2) == "lua":  # commands a script runs are not round trips
        continue
    try:
        args = shlex.split(m.group(3))
    except ValueError:
        args = m.group(3).split()
    cmd = args[0].upper()
    if cmd == "ECHO":
        a = args[1]
        section = a.split(" ", 1)[1] if a.startswith("mark-before") else ("after the responses, until the update is delivered" if a.startswith("mark-after") else None)
        continue
    if section is None:
        continue
    if cmd == "EVALSHA":
        n = int(args[2]); keys = args[3:3 + n]; rest = args[3 + n:]
        if keys and keys[0].startswith("ag:{dbq}"):
            if len(rest) == 1: kind = ("updater", "write", "EVALSHA queue ack")
            elif all(x.isdigit() for x in rest): kind = ("updater", "write", "EVALSHA queue claim (lease)")
            else: kind = ("request", "write", "EVALSHA queue enqueue (Set-Device-Bits)")
        else:
            kind = ("request", "write", "EVALSHA assertion commit (counter)")
    elif cmd == "SET" and args[1].startswith("ag:dt:"):
        kind = ("request", "write", "SET NX ag:dt:{H(token)} (first use)")
    elif cmd == "ZCARD":
        kind = ("updater", "read", "ZCARD queue depth")
    elif cmd in ("HMGET", "HGET", "GET", "HGETALL", "EXISTS"):
        kind = ("request", "read", cmd + " " + args[1].split("}")[0][:6] + "…}" + (args[1].split("}")[1] if "}" in args[1] else ""))
    else:
        kind = ("?", "?", " ".join(args[:2]))
    counts.setdefault(section, {}).setdefault(kind, 0)
    counts[section][kind] += 1
for section, kinds in counts.items():
    writes = sum(n for (who, rw, _), n in kinds.items() if who == "request" and rw == "write")
    print(f"{section}:" + (f"  request-path writes: {writes}" if section.startswith("/") else ""))
    for (who, rw, what), n in sorted(kinds.items()):
        print(f"  {n:3d}  {who:8s} {rw:5s}  {what}")
PY
  grep -E '^(status|HTTP)|^[0-9]{3}' "$WORK"/part3-*.out 2>/dev/null | head -4
  stop_gateway
fi
