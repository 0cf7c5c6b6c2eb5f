#!/usr/bin/env bash
# The gateway and nghttpx at the SAME offered rate, below both proxies'
# saturation, on the load of side-by-side.sh (h2c from h2load, one worker, one
# nginx HTTP/1.1 keep-alive upstream answering GET /hello with 64 bytes): at
# saturation a faster proxy batches more per wake-up, so CPU per request is
# only comparable at equal rates. Per request, split the way the kernel
# accounts it: user and system CPU µs, context switches, syscalls; and a flat
# `perf record -e task-clock` profile of each (the VM has no hardware
# counters): the share of kernel, libnghttp2, libc, the Swift runtime, NIO
# and the gateway's own code, and the top symbols.
#
#   Benchmarks/same-rate.sh [-R RPS] [-d S] [-r N] [target...]
#
#   target   nghttpx assertgate (default both), assertgate-old (the binary
#            OLD_ASSERTGATE names): each started fresh, one at a time
#   -R RPS   offered requests per second in all (default 16000): h2load -c 32
#            -m 32 --rps RPS/32 (per client)
#   -d S     measured seconds (default 10), after 20,000 requests of warm-up
#   -r N     rounds, targets alternated (default 1); the profile is the last's
#
# Needs: nghttp2-proxy nghttp2-client nginx linux-perf python3, and a
# release build (swift build -c release --product assertgate).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RPS=16000 SECS=10 ROUNDS=1 TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
    -R) RPS=$2; shift ;;
    -d) SECS=$2; shift ;;
    -r) ROUNDS=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    nghttpx | assertgate | assertgate-old) TARGETS+=("$1") ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(nghttpx assertgate)
PER_CLIENT=$((RPS / 32))
[ "$PER_CLIENT" -ge 1 ] || { echo "-R must be at least 32" >&2; exit 2; }
. "$ROOT/Benchmarks/proc-control.sh"
bench_setup same-rate "${TARGETS[@]}"
. "$ROOT/Benchmarks/nghttpx-anchor.sh"
UP=$(free_port)

# PIDS...: "utime stime voluntary_switches involuntary_switches" summed over
# every thread of the processes (clock ticks, counts).
counters() {
    python3 - "$@" <<'PY'
import os, sys
u = s = v = n = 0
for pid in sys.argv[1:]:
    for t in os.listdir(f"/proc/{pid}/task"):
        f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
        u += int(f[11]); s += int(f[12])
        for line in open(f"/proc/{pid}/task/{t}/status"):
            if line.startswith("voluntary_ctxt_switches"): v += int(line.split()[1])
            if line.startswith("nonvoluntary_ctxt_switches"): n += int(line.split()[1])
print(u, s, v, n)
PY
}

. "$ROOT/Benchmarks/nginx-upstream.sh"
nginx_upstream_conf "$WORK/up" "$UP" "$NGINX_HELLO_LOCATIONS"
spawn "$WORK/up/out.log" nginx -p "$WORK/up" -c "$WORK/up/nginx.conf" -e "$WORK/up/error.log" -g 'daemon off;'
wait_listening "$UP"

configure() { # TARGET: sets PORT and CMD
    local t=$1 dir="$WORK/$1"
    mkdir -p "$dir"
    PORT=$(free_port)
    case "$t" in
    nghttpx)
        nghttpx_anchor_conf "$dir" "$PORT" "$UP" http/1.1 1
        CMD=(nghttpx "--conf=$dir/nghttpx.conf")
        ;;
    assertgate | assertgate-old)
        local gw="$BIN/assertgate"
        [ "$t" = assertgate ] || gw=${OLD_ASSERTGATE:?set OLD_ASSERTGATE}
        sed -e "s/127\.0\.0\.1:9301/127.0.0.1:$PORT/; s/127\.0\.0\.1:9391/127.0.0.1:$(free_port)/; s#http://127\.0\.0\.1:9001#http://127.0.0.1:$UP#" \
            "$ROOT/Benchmarks/passthrough-bench.yaml" >"$dir/gateway.yaml"
        CMD=("$gw" serve --config "$dir/gateway.yaml" --workers 1)
        ;;
    esac
}

HZ=$(getconf CLK_TCK)
printf 'round\ttarget\trequests\treq/s\tuser us/req\tsys us/req\tCPU us/req\tcontext switches/req\tsyscalls/req\n' >"$WORK/runs.tsv"
one() { # ROUND TARGET PROFILE(0/1)
    local round=$1 t=$2 profile=$3 dir="$WORK/$2"
    configure "$t"
    spawn "$dir/out-$round.log" "${CMD[@]}"
    local sid=$SPAWNED url
    wait_listening "$PORT"
    url="http://127.0.0.1:$PORT/hello"
    h2load -n 20000 -c 32 -m 32 "$url" >"$dir/warmup-$round.txt" 2>&1
    local pids c0 c1
    pids=$(session_members "$sid" | paste -sd, -)
    c0=$(counters ${pids//,/ })
    local rec=()
    if [ "$profile" = 1 ]; then
        rec=(perf record -q -e task-clock -F 4999 -p "$pids" -o "$dir/perf.data" --)
    fi
    perf stat -x, -e raw_syscalls:sys_enter -p "$pids" -o "$dir/perf-stat-$round.txt" -- \
        "${rec[@]}" h2load -c 32 -m 32 --rps "$PER_CLIENT" -D "$SECS" "$url" >"$dir/run-$round.txt" 2>&1
    c1=$(counters ${pids//,/ })
    stop "$sid"
    python3 - "$round" "$t" "$HZ" "$dir/run-$round.txt" "$dir/perf-stat-$round.txt" "$c0" "$c1" >>"$WORK/runs.tsv" <<'PY'
import re, sys
rnd, t, hz, run, stat = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
a = [int(x) for x in sys.argv[6].split()]; b = [int(x) for x in sys.argv[7].split()]
text = open(run).read()
m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed", text)
done, failed = int(m.group(4)), int(m.group(5))
if failed:
    print(f"{t}: {failed} requests failed", file=sys.stderr)
rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", text).group(1)
sc = next(int(l.split(",")[0]) for l in open(stat) if "raw_syscalls:sys_enter" in l)
us = lambda ticks: ticks / hz * 1e6 / done
print("\t".join([rnd, t, str(done), rate, f"{us(b[0]-a[0]):.1f}", f"{us(b[1]-a[1]):.1f}",
                 f"{us(b[0]-a[0]+b[1]-a[1]):.1f}", f"{(b[2]-a[2]+b[3]-a[3])/done:.3f}", f"{sc/done:.2f}"]))
PY
    tail -n 1 "$WORK/runs.tsv" >&2
    if [ "$profile" = 1 ]; then
        perf report -i "$dir/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 12 >"$dir/profile-dso.txt" || true
        perf report -i "$dir/perf.data" --no-children --sort dso,sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 40 >"$dir/profile-sym.txt" || true
    fi
}

{
    echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "offered: $RPS req/s (h2load -c 32 -m 32 --rps $PER_CLIENT -D $SECS)"
} | tee "$WORK/env.txt"
for r in $(seq "$ROUNDS"); do
    for t in "${TARGETS[@]}"; do one "$r" "$t" "$([ "$r" = "$ROUNDS" ] && echo 1 || echo 0)"; done
done
column -t -s $'\t' "$WORK/runs.tsv"
for t in "${TARGETS[@]}"; do
    echo "== $t: profile by DSO (task-clock samples, round $ROUNDS)"
    cat "$WORK/$t/profile-dso.txt"
    echo "== $t: top symbols"
    cat "$WORK/$t/profile-sym.txt"
done
echo "raw: $WORK" >&2
