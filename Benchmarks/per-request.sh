#!/usr/bin/env bash
# What one passthrough request costs the gateway and nghttpx, counted rather
# than timed (the machine is shared): syscalls, TCP segments, user-space
# instructions and allocations per request, on the load of side-by-side.sh
# (h2c from h2load, one worker, one nginx HTTP/1.1 keep-alive upstream
# answering GET /hello with 64 bytes).
#
#   Benchmarks/per-request.sh [-n N] [-N N_CALLGRIND] [target...]
#
#   target   nghttpx assertgate (default both), assertgate-old (the binary
#            OLD_ASSERTGATE names): each started fresh, one at a time
#   -n N     requests of each native run (default 100000), h2load -c 32 -m 32
#   -N N     requests under callgrind (default 10000), h2load -c 4 -m 8: 32
#            streams, so neither proxy's upstream connections time out while
#            valgrind slows it ~50 times
#   --upstream-h2  the upstream speaks HTTP/2 (h2c, prior knowledge):
#            nghttpx `proto=h2`, AssertGate `h2c://` (issue 19's bench)
#   --callgrind-only  skip the native runs (syscalls, segments, CPU)
#   -1       under callgrind, one request at a time (h2load -c 1 -m 1): no
#            batching, so each request pays its own read and flush and the
#            gateway's count repeats to about 0.2 % (with 32 streams the
#            totals move by ±1,500 Ir with how many requests share a flush);
#            use it to compare builds, the default to compare with nghttpx
#            under the bench's batching
#
# Native runs (after 20,000 requests of warm-up): syscalls from the
# raw_syscalls:sys_enter tracepoint over every thread of the proxy
# (`perf stat -p`), the busiest syscalls from `perf trace -s` in a second run,
# TCP segments from `nstat` (TcpOutSegs, the whole machine: both hops, and
# anything else on it) and the upstream hop's alone from `ss -ti` (segs_out +
# segs_in of the proxy's upstream sockets, which the warm-up opened).
# Callgrind runs: Ir (user-space instructions, all threads) and calls to
# malloc/calloc/realloc and to Swift's retain/release between
# `callgrind_control -z` and `-d`, read by Benchmarks/callgrind_counts.py.
# Valgrind 3.19 cannot read a Swift 6.3 binary's DWARF, so the gateway runs
# as a copy without debug info (`objcopy --strip-debug`, symbols kept), with
# Benchmarks/valgrind-sigsuspend.c preloaded (see there).
#
# Needs: nghttp2-proxy nghttp2-client nginx linux-perf valgrind iproute2
# python3 gcc, and a release build (swift build -c release --product assertgate).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N=100000 NCG=10000 CGLOAD="-c 4 -m 8" TARGETS=() H2UP=0 NATIVE=1
while [ $# -gt 0 ]; do
    case "$1" in
    -n) N=$2; shift ;;
    -N) NCG=$2; shift ;;
    -1) CGLOAD="-c 1 -m 1" ;;
    --upstream-h2) H2UP=1 ;;
    --callgrind-only) NATIVE=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    nghttpx | assertgate | assertgate-old) TARGETS+=("$1") ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(nghttpx assertgate)
. "$ROOT/Benchmarks/proc-control.sh"
bench_setup per-request "${TARGETS[@]}"
. "$ROOT/Benchmarks/nghttpx-anchor.sh"
UP=$(free_port)
cc -O2 -shared -fPIC -o "$WORK/sigsuspend.so" "$ROOT/Benchmarks/valgrind-sigsuspend.c"


. "$ROOT/Benchmarks/nginx-upstream.sh"
UP_LISTEN="" UP_PROTO=http/1.1 UP_SCHEME=http
[ "$H2UP" = 0 ] || { UP_LISTEN=http2; UP_PROTO=h2; UP_SCHEME=h2c; }
nginx_upstream_conf "$WORK/up" "$UP" "$NGINX_HELLO_LOCATIONS" "$UP_LISTEN"
spawn "$WORK/up/out.log" nginx -p "$WORK/up" -c "$WORK/up/nginx.conf" -e "$WORK/up/error.log" -g 'daemon off;'
wait_listening "$UP"

configure() { # TARGET CALLGRIND(0/1): sets PORT and CMD
    local t=$1 cg=$2 dir="$WORK/$1"
    mkdir -p "$dir"
    PORT=$(free_port)
    local vg=(valgrind --tool=callgrind "--callgrind-out-file=$dir/callgrind.%p")
    case "$t" in
    nghttpx)
        nghttpx_anchor_conf "$dir" "$PORT" "$UP" "$UP_PROTO" 1
        CMD=(nghttpx "--conf=$dir/nghttpx.conf")
        if [ "$cg" = 1 ]; then CMD=("${vg[@]}" --trace-children=yes "${CMD[@]}"); fi
        ;;
    assertgate | assertgate-old)
        local gw="$BIN/assertgate"
        [ "$t" = assertgate ] || gw=${OLD_ASSERTGATE:?set OLD_ASSERTGATE}
        sed -e "s/127\.0\.0\.1:9301/127.0.0.1:$PORT/; s/127\.0\.0\.1:9391/127.0.0.1:$(free_port)/; s#http://127\.0\.0\.1:9001#$UP_SCHEME://127.0.0.1:$UP#" \
            "$ROOT/Benchmarks/passthrough-bench.yaml" >"$dir/gateway.yaml"
        CMD=("$gw" serve --config "$dir/gateway.yaml" --workers 1)
        if [ "$cg" = 1 ]; then
            objcopy --strip-debug "$gw" "$dir/assertgate-nodebug"
            CMD=(env "LD_PRELOAD=$WORK/sigsuspend.so" "${vg[@]}" "$dir/assertgate-nodebug" serve --config "$dir/gateway.yaml" --workers 1)
        fi
        ;;
    esac
}

up_segs() { # segs_out + segs_in of the sockets connected to the upstream's port
    ss -tinH state established "( dport = :$UP )" | grep -o ' segs_\(out\|in\):[0-9]*' | awk -F: '{ s += $2 } END { print s + 0 }'
}
nstat_out() { nstat -az TcpOutSegs | awk '$1 == "TcpOutSegs" { print $2 }'; }
ticks() { local s=0 p; for p in "$@"; do s=$((s + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo $s; }

printf 'target\trequests\tsyscalls/req\tsegments/req (all hops)\tupstream segments/req\tCPU us/req (native, noisy)\tbusiest syscalls per request\n' >"$WORK/native.tsv"
native() {
    local t=$1 dir="$WORK/$1"
    configure "$t" 0
    spawn "$dir/native.log" "${CMD[@]}"
    local sid=$SPAWNED url
    wait_listening "$PORT"
    url="http://127.0.0.1:$PORT/hello"
    h2load -n 20000 -c 32 -m 32 "$url" >"$dir/warmup.txt" 2>&1
    local pids
    pids=$(session_members "$sid" | paste -sd, -)
    local s0 u0 c0
    s0=$(nstat_out); u0=$(up_segs); c0=$(ticks ${pids//,/ })
    perf stat -x, -e raw_syscalls:sys_enter -p "$pids" -o "$dir/perf-stat.txt" -- h2load -n "$N" -c 32 -m 32 "$url" >"$dir/run.txt" 2>&1
    local s1 u1 c1
    s1=$(nstat_out); u1=$(up_segs); c1=$(ticks ${pids//,/ })
    grep -q "requests: $N total, $N started, $N done, $N succeeded" "$dir/run.txt" || { echo "$t: not every request succeeded" >&2; tail "$dir/run.txt" >&2; exit 1; }
    perf trace -s -p "$pids" -o "$dir/perf-trace.txt" -- h2load -n "$N" -c 32 -m 32 "$url" >"$dir/run-trace.txt" 2>&1 || true
    stop "$sid"
    python3 - "$t" "$N" "$dir/perf-stat.txt" "$dir/perf-trace.txt" "$s0" "$s1" "$u0" "$u1" "$c0" "$c1" "$(getconf CLK_TCK)" "$dir/run.txt" >>"$WORK/native.tsv" <<'PY'
import collections, re, sys
t, n, stat, trace = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s0, s1, u0, u1, c0, c1, hz = (int(x) for x in sys.argv[5:12])
sys_total = next(int(l.split(",")[0]) for l in open(stat) if "raw_syscalls:sys_enter" in l)
calls = collections.Counter()
for l in open(trace):
    m = re.match(r"\s+(\w+)\s+(\d+)\s+\d+\s+[\d.]+", l)
    if m:
        calls[m.group(1)] += int(m.group(2))
busiest = ", ".join(f"{k} {v / n:.2f}" for k, v in calls.most_common(5))
print("\t".join([t, str(n), f"{sys_total / n:.2f}", f"{(s1 - s0) / n:.2f}", f"{(u1 - u0) / n:.2f}",
                 f"{(c1 - c0) / hz * 1e6 / n:.1f}", busiest]))
PY
    tail -n 1 "$WORK/native.tsv" >&2
}

callgrind() {
    local t=$1 dir="$WORK/$1"
    configure "$t" 1
    spawn "$dir/callgrind.log" "${CMD[@]}"
    local sid=$SPAWNED url="http://127.0.0.1:$PORT/hello"
    wait_listening "$PORT"
    h2load -n 2000 $CGLOAD "$url" >"$dir/cg-warmup.txt" 2>&1
    local p
    for p in $(session_members "$sid"); do if grep -q valgrind "/proc/$p/cmdline" 2>/dev/null; then callgrind_control -z "$p" >/dev/null || true; fi; done
    h2load -n "$NCG" $CGLOAD "$url" >"$dir/cg-run.txt" 2>&1
    for p in $(session_members "$sid"); do if grep -q valgrind "/proc/$p/cmdline" 2>/dev/null; then callgrind_control -d "$p" >/dev/null || true; fi; done
    sleep 1
    grep -q "requests: $NCG total, $NCG started, $NCG done, $NCG succeeded" "$dir/cg-run.txt" || { echo "$t (callgrind): not every request succeeded" >&2; tail "$dir/cg-run.txt" >&2; }
    stop "$sid"
    python3 "$ROOT/Benchmarks/callgrind_counts.py" "$NCG" "$dir"/callgrind.*.1 --top 30 >"$dir/callgrind.txt"
    echo "== $t (callgrind, $NCG requests, h2load $CGLOAD)"
    head -n 12 "$dir/callgrind.txt"
}

{
    echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "versions: $(nghttpx --version 2>&1 | head -n 1); $(h2load --version 2>&1 | head -n 1); $(valgrind --version)"
} | tee "$WORK/env.txt"
if [ "$NATIVE" = 1 ]; then
    for t in "${TARGETS[@]}"; do native "$t"; done
    column -t -s $'\t' "$WORK/native.tsv"
fi
for t in "${TARGETS[@]}"; do callgrind "$t"; done
echo "raw: $WORK" >&2
