#!/usr/bin/env bash
# Asserted requests through the gateway vs the same route in passthrough, and
# the ECDSA-verify bound, measured in one run (issue "Enforcement end to end").
#
#   Benchmarks/enforcement.sh [rounds=3] [seconds=10]
#
# Starts its own nginx upstream (GET /hello: 64 B), redis-server and a release
# `assertgate serve --workers 1` on free loopback ports; load comes from
# `assertgate-device load` (HTTP/2, C connections x S streams, a fresh
# assertion on every request). Alternates passthrough / asserted each round.
# The load tool reads the gateway's CPU (/proc/<pid>/stat) at the start and the
# end of the measured window (`--cpu-pid`), so "per core" figures are requests
# per gateway CPU-second over exactly the measured requests (key setup and
# warm-up excluded), robust to the load generator sharing the machine.
# Latency below saturation: both modes again at half of the asserted peak,
# paced (`--rate`, phases spread evenly over all connections, each slot on a
# fixed schedule, latency counted from when a request was due), with every
# asserted request's assertion signed BEFORE the run (`--presign`), so the
# client does no ECDSA work inside the measured window. The gateway's own
# `assertgate_enforcement_duration_seconds` over each asserted half-load run
# shows how long the check itself took, apart from queueing.
#
# PIN=1 (default): the gateway alone on CPU 1; load tool (one event-loop
# thread), nginx and Redis on CPU 0. PIN=0 lets everything float.
# WORKERS=N: gateway workers (default 1; with PIN=1 they share CPU 1).
# IDLE_POLL=1: hold /dev/cpu_dma_latency at 0 during the run (what cyclictest
# and tuned's latency-performance profile do), so idle vCPUs poll instead of
# halting; on this Firecracker VM (cpuidle haltpoll, guest_halt_poll_ns=0)
# waking a halted vCPU costs tens of µs and sometimes milliseconds.
# STORE_YAML='{redis: {cluster: [...]}}' STATS_PORTS='p1 p2 p3': the gateway
# stores into that Redis Cluster instead (started by the caller), and the
# commandstats are summed over those nodes.
# HALT_POLL_NS=N: set the haltpoll cpuidle governor's guest_halt_poll_ns for
# the run (restored on exit): an idle vCPU polls up to N ns before halting,
# growing/shrinking adaptively, so a wake-up that comes soon after going idle
# costs no VM exit while a long idle period still halts.
# Prints a Markdown report on stdout; logs go to $WORK.
set -euo pipefail
ROUNDS="${1:-3}"
SECS="${2:-10}"
C="${CONNS:-4}"
S="${STREAMS:-16}"
if [ "${PIN:-1}" = 1 ]; then
    ON_GW="taskset -c 1"; ON_REST="taskset -c 0"; LOAD_THREADS=(--threads 1)
else
    ON_GW=""; ON_REST=""; LOAD_THREADS=()
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
. "$ROOT/Benchmarks/bench-env.sh"
GW="$BIN/assertgate"
[ -x "$GW" ] || { echo "build first: swift build -c release --product assertgate" >&2; exit 2; }
if [ -n "${HALT_POLL_NS:-}" ]; then
    HP=/sys/module/haltpoll/parameters/guest_halt_poll_ns
    OLD_HP=$(cat "$HP")
    echo "$HALT_POLL_NS" >"$HP"
    trap 'echo "$OLD_HP" >"$HP"; cleanup' EXIT
fi
if [ "${IDLE_POLL:-0}" = 1 ]; then
    python3 -c 'import struct, time; f = open("/dev/cpu_dma_latency", "wb", buffering=0); f.write(struct.pack("i", 0)); time.sleep(86400)' & pids+=($!)
fi
$ON_GW "$GW" serve --config "$WORK/gw.yaml" --workers "${WORKERS:-1}" >"$WORK/gateway.log" 2>&1 & GWPID=$!; pids+=($GWPID)
wait_ready

run() { # name path extra-args...
    local name=$1 path=$2; shift 2
    $ON_REST "$DEV" load --gateway "http://127.0.0.1:$GP" --state "$WORK/device" --path "$path" --cpu-pid "$GWPID" \
        --connections "$C" --streams "$S" --duration "$SECS" --warmup 2 "${LOAD_THREADS[@]}" --json "$@" >"$WORK/$name.json" 2>>"$WORK/load.log"
    python3 - "$WORK/$name.json" "$name" >>"$WORK/rows.tsv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); name = sys.argv[2]
cpu_s = r["targetCPUSeconds"]
lat = r["latencyMs"]
print("\t".join(str(x) for x in [name, r["requests"], r["successes"], round(r["requestsPerSecond"]), cpu_s,
      lat.get("p50"), lat.get("p99"), lat.get("mean"), lat.get("p90"), lat.get("p999")]))
PY
}

: >"$WORK/rows.tsv"
openssl speed -seconds 5 ecdsap256 2>/dev/null | awk '/256 bits ecdsa/ {print $NF}' | tail -1 >"$WORK/verify.txt"
for i in $(seq "$ROUNDS"); do
    run "passthrough-$i" /open/hello --passthrough
    for p in ${STATS_PORTS:-$RP}; do redis-cli -p "$p" CONFIG RESETSTAT >/dev/null; done
    run "asserted-$i" /api/hello
    # Summed over every node given (a cluster's masters), one line per command.
    for p in ${STATS_PORTS:-$RP}; do redis-cli -p "$p" INFO commandstats; done | tr -d '\r' \
        | grep -E '^cmdstat_(evalsha|hmget|get|set|eval):' \
        | awk -F'[:=,]' '{n[$1] += $3} END {for (c in n) print c ":calls=" n[c] ","}' | sort >"$WORK/commandstats-$i.txt" || true
done
# Latency below saturation: both modes at half of the asserted median rate.
HALF=$(python3 -c "
import statistics
rows=[l.split('\t') for l in open('$WORK/rows.tsv')]
print(int(statistics.median(float(r[3]) for r in rows if r[0].startswith('asserted'))/2))")
enforcement_buckets() { curl -sf "http://127.0.0.1:$AP/metrics" | grep '^assertgate_enforcement_duration_seconds_bucket{mode="enforce"' >"$1"; }
for i in $(seq "$ROUNDS"); do
    run "half-passthrough-$i" /open/hello --passthrough --rate "$HALF"
    enforcement_buckets "$WORK/enforcement-before-$i.txt"
    run "half-asserted-$i" /api/hello --rate "$HALF" --presign
    enforcement_buckets "$WORK/enforcement-after-$i.txt"
done

python3 - "$WORK" "$C" "$S" "$SECS" "$HALF" "${WORKERS:-1}" <<'PY'
import statistics, sys, glob
work, c, s, secs, half, workers = sys.argv[1:7]
rows = [l.rstrip("\n").split("\t") for l in open(f"{work}/rows.tsv")]
verify = float(open(f"{work}/verify.txt").read().strip() or "nan")
def pick(prefix):
    return [r for r in rows if r[0].rsplit("-", 1)[0] == prefix]
def med(rs, i): return statistics.median(float(r[i]) for r in rs)
p, a = pick("passthrough"), pick("asserted")
hp, ha = pick("half-passthrough"), pick("half-asserted")
per_core = lambda rs: statistics.median(float(r[1]) / float(r[4]) for r in rs if float(r[4]) > 0)
t_verify = 1 / verify
t_pass = 1 / per_core(p)
bound = 1 / (t_verify + t_pass)
ev = [open(f).read() for f in sorted(glob.glob(f"{work}/commandstats-*.txt"))]
print(f"| measure | passthrough | asserted |\n|---|---|---|")
print(f"| requests/s (wall, median of {len(a)}) | {med(p,3):,.0f} | {med(a,3):,.0f} |")
print(f"| requests per gateway CPU-second ({workers} worker{'s' if workers != '1' else ''}) | {per_core(p):,.0f} | {per_core(a):,.0f} |")
print(f"| p50 / p99 ms at saturation | {med(p,5):.2f} / {med(p,6):.2f} | {med(a,5):.2f} / {med(a,6):.2f} |")
print(f"| p50 / p99 ms at {half} req/s (half of asserted peak) | {med(hp,5):.2f} / {med(hp,6):.2f} | {med(ha,5):.2f} / {med(ha,6):.2f} |")
print()
print(f"- `openssl speed -seconds 5 ecdsap256` verify/s (same run): {verify:,.0f} → t_verify = {t_verify*1e6:.1f} µs")
print(f"- t_passthrough = 1 / passthrough per-core rate = {t_pass*1e6:.1f} µs; bound 1/(t_verify + t_passthrough) = {bound:,.0f} req/s per core")
print(f"- asserted per core / bound = **{per_core(a)/bound:.2f}** (goal ≥ 0.7)")
print(f"- p99 added by enforcement at half load: **{(med(ha,6)-med(hp,6)):.2f} ms** (goal < 1 ms)")
print("- half-load runs, per round (ms): " + "; ".join(
    f"round {i+1}: passthrough p50 {float(x[5]):.2f} p90 {float(x[8]):.2f} p99 {float(x[6]):.2f} p99.9 {float(x[9]):.2f}, "
    f"asserted p50 {float(y[5]):.2f} p90 {float(y[8]):.2f} p99 {float(y[6]):.2f} p99.9 {float(y[9]):.2f}, "
    f"gateway µs/request {float(x[4])/float(x[1])*1e6:.0f} / {float(y[4])/float(y[1])*1e6:.0f}"
    for i, (x, y) in enumerate(zip(hp, ha))))
def buckets(path):
    out = {}
    for line in open(path):
        le = line.split('le="')[1].split('"')[0]
        out[float(le)] = int(line.rsplit(" ", 1)[1])
    return out
stage = []
for i in range(1, len(ha) + 1):
    before, after = buckets(f"{work}/enforcement-before-{i}.txt"), buckets(f"{work}/enforcement-after-{i}.txt")
    d = {le: after[le] - before.get(le, 0) for le in after}
    total = d[float("inf")]
    p99 = min(le for le, n in d.items() if n >= 0.99 * total)
    stage.append(f"round {i}: {100 * d.get(0.001, 0) / total:.2f} % within 1 ms, p99 ≤ {p99 * 1000:g} ms")
print("- the check itself at half load (`assertgate_enforcement_duration_seconds`, parse + verify + commit, "
      "warm-up included): " + "; ".join(stage))
print(f"- load: {c} connections × {s} streams, {secs} s measured + 2 s warm-up per run")
print("- Redis `INFO commandstats` over each asserted run (requests include the warm-up):")
for i, e in enumerate(ev, 1):
    reqs = [r for r in a if r[0] == f"asserted-{i}"]
    print(f"  - round {i}: " + ", ".join(l.split(":")[0].replace("cmdstat_","") + " " + l.split("calls=")[1].split(",")[0] for l in e.splitlines()))
PY
echo
echo "raw: $WORK"
