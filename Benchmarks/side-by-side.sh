#!/usr/bin/env bash
# AssertGate beside three established HTTP/2 reverse proxies, on this machine,
# over loopback only: nghttpx, HAProxy and nginx each forward h2c (HTTP/2
# with prior knowledge) from h2load to one HTTP/1.1 keep-alive upstream (an
# nginx with one worker answering GET /hello with 64 bytes of JSON), and so
# does a release `assertgate serve` with one passthrough route
# (Benchmarks/passthrough-bench.yaml). Every figure is reported as a ratio to
# an anchor proxy measured in the same run (nghttpx by default).
#
#   Benchmarks/side-by-side.sh [options] [target...]
#
#   target        nghttpx haproxy nginx assertgate (default: all four), and
#                 assertgate-old: the binary OLD_ASSERTGATE names, with the
#                 same config (an A/B of two builds in one run)
#   -r N          rounds (default 3); a round runs every target once, in the
#                 order given, so drift on a shared host reaches all of them
#   -d S          measured seconds per run (default 10), after -w S of
#                 warm-up (default 2)
#   -c N, -m N    h2load connections, and streams per connection (32, 32)
#   -W N          workers/threads of every proxy (default 1)
#   --pin         proxy alone on CPU 1; h2load and the upstream on CPU 0
#   --upstream-h2 the upstream speaks HTTP/2 (h2c, prior knowledge) and the
#                 proxies reach it over HTTP/2: nghttpx `proto=h2`, HAProxy
#                 `proto h2`, AssertGate `h2c://` (nginx cannot proxy to an
#                 HTTP/2 upstream and is left out)
#   --anchor T    the target the ratios are taken against (default nghttpx)
#   --install     apt-get install whatever of the packages below is missing
#
# Needs (Debian 12 packages): nghttp2-proxy (nghttpx), nghttp2-client
# (h2load), haproxy, nginx, curl, python3, iproute2 (ss), util-linux
# (taskset, for --pin); and a release build of the gateway:
#   swift build -c release --product assertgate
# Prints a Markdown table on stdout; per-run rows (runs.tsv), the h2load
# output of each run and every daemon's log stay in a mktemp directory named
# at the start and the end.
#
# How each run is measured: the proxy is started fresh in its own session,
# must answer 20 requests with 2xx and exactly the upstream's 64 bytes, then
# h2load runs `-t 1 -c C -m M -D d --warm-up-time w`. The proxy's CPU time is
# the utime+stime of every process in its session (/proc/PID/stat), read when
# the warm-up ends and when h2load exits, so `proxy µs/req` is proxy
# CPU-seconds per request over the measured window. `rest %` is the machine's
# busy time minus the proxy and the upstream: h2load plus anything else that
# ran (builds by other people on a shared host show up there). Latency
# percentiles come from h2load's per-request log. Processes are stopped by
# PID (TERM, then KILL after 5 s), never by name.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ROUNDS=3 SECS=10 WARMUP=2 CONNS=32 STREAMS=32 WORKERS=1 PIN=0 ANCHOR=nghttpx INSTALL=0 H2UP=0
TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
    -r) ROUNDS=$2; shift ;;
    -d) SECS=$2; shift ;;
    -w) WARMUP=$2; shift ;;
    -c) CONNS=$2; shift ;;
    -m) STREAMS=$2; shift ;;
    -W) WORKERS=$2; shift ;;
    --pin) PIN=1 ;;
    --upstream-h2) H2UP=1 ;;
    --anchor) ANCHOR=$2; shift ;;
    --install) INSTALL=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    nghttpx | haproxy | nginx | assertgate | assertgate-old) TARGETS+=("$1") ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$H2UP" = 1 ]; then
    [ ${#TARGETS[@]} -gt 0 ] || TARGETS=(nghttpx haproxy assertgate)
    for t in "${TARGETS[@]}"; do
        [ "$t" != nginx ] || { echo "nginx cannot proxy to an HTTP/2 upstream: leave it out with --upstream-h2" >&2; exit 2; }
    done
fi
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(nghttpx haproxy nginx assertgate)
for v in ROUNDS SECS WARMUP CONNS STREAMS WORKERS; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || { echo "$v must be a positive integer" >&2; exit 2; }
done

# ---- requirements: each command and the Debian package that has it
declare -A PKG=([nghttpx]=nghttp2-proxy [h2load]=nghttp2-client [haproxy]=haproxy [nginx]=nginx
    [curl]=curl [python3]=python3 [ss]=iproute2 [taskset]=util-linux)
missing=()
for cmd in "${!PKG[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("${PKG[$cmd]}")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$INSTALL" = 1 ]; then
        SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "missing packages: ${missing[*]}" >&2
        echo "install them (sudo apt-get install ${missing[*]}) or rerun with --install" >&2
        exit 2
    fi
fi
if [ "$PIN" = 1 ] && [ "$(nproc)" -lt 2 ]; then echo "--pin needs 2 CPUs" >&2; exit 2; fi
ON_PROXY=() ON_REST=()
[ "$PIN" = 1 ] && ON_PROXY=(taskset -c 1) ON_REST=(taskset -c 0)

. "$ROOT/Benchmarks/proc-control.sh"
bench_setup side-by-side "${TARGETS[@]}"
GW="$BIN/assertgate"
. "$ROOT/Benchmarks/nghttpx-anchor.sh"
UP=$(free_port)
HZ=$(getconf CLK_TCK)
trap 'echo "interrupted" >&2; exit 130' INT TERM


busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# wait_listening PORT PID: until something accepts on 127.0.0.1:PORT (30 s at
# most); fails at once if PID exits.
wait_listening() {
    for _ in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# ---- the upstream: nginx, one worker, HTTP/1.1 keep-alive, 64-byte answer
. "$ROOT/Benchmarks/nginx-upstream.sh"
[ ${#NGINX_HELLO_BODY} -eq 64 ] || { echo "internal: body is ${#NGINX_HELLO_BODY} bytes" >&2; exit 1; }
UP_LISTEN="" UP_PROTO=http/1.1 UP_SCHEME=http
[ "$H2UP" = 0 ] || { UP_LISTEN=http2; UP_PROTO=h2; UP_SCHEME=h2c; }
nginx_upstream_conf "$WORK/upstream" "$UP" "$NGINX_HELLO_LOCATIONS" "$UP_LISTEN"
spawn "$WORK/upstream/out.log" "${ON_REST[@]}" nginx -p "$WORK/upstream" -c "$WORK/upstream/nginx.conf" -e "$WORK/upstream/error.log" -g 'daemon off;'
UPSTREAM_PID=$SPAWNED
wait_listening "$UP" "$UPSTREAM_PID" || { cat "$WORK/upstream/out.log" "$WORK/upstream/error.log" >&2; echo "the upstream did not start" >&2; exit 1; }

# ---- one function per target: writes its config, sets PORT and CMD
configure() { # TARGET
    local t=$1 dir="$WORK/$1"
    mkdir -p "$dir"
    PORT=$(free_port)
    case "$t" in
    nghttpx)
        nghttpx_anchor_conf "$dir" "$PORT" "$UP" "$UP_PROTO" "$WORKERS"
        CMD=(nghttpx "--conf=$dir/nghttpx.conf")
        ;;
    haproxy)
        cat >"$dir/haproxy.cfg" <<EOF
global
    nbthread $WORKERS
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 300s
frontend h2c
    bind 127.0.0.1:$PORT proto h2
    default_backend upstream
backend upstream
    server up 127.0.0.1:$UP$([ "$H2UP" = 0 ] || echo " proto h2")
EOF
        CMD=(haproxy -db -f "$dir/haproxy.cfg")
        ;;
    nginx)
        { nginx_conf_head "$dir" "$WORKERS"; cat <<EOF; } >"$dir/nginx.conf"
    http2_max_concurrent_streams 128;
    upstream legacy {
        server 127.0.0.1:$UP;
        keepalive 2048;
        keepalive_requests 1000000000;
        keepalive_timeout 300s;
    }
    server {
        listen 127.0.0.1:$PORT http2;
        location / {
            proxy_pass http://legacy;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
        CMD=(nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -g 'daemon off;')
        ;;
    assertgate | assertgate-old)
        local admin gw=$GW
        [ "$t" = assertgate ] || gw=$OLD_ASSERTGATE
        admin=$(free_port)
        sed -e "s/127\.0\.0\.1:9301/127.0.0.1:$PORT/; s/127\.0\.0\.1:9391/127.0.0.1:$admin/; s#http://127\.0\.0\.1:9001#$UP_SCHEME://127.0.0.1:$UP#" \
            "$ROOT/Benchmarks/passthrough-bench.yaml" >"$dir/gateway.yaml"
        grep -q "127.0.0.1:$PORT" "$dir/gateway.yaml" && grep -q "127.0.0.1:$UP" "$dir/gateway.yaml" ||
            { echo "Benchmarks/passthrough-bench.yaml no longer has the ports this script replaces" >&2; exit 1; }
        "$gw" check-config "$dir/gateway.yaml" >/dev/null
        CMD=("$gw" serve --config "$dir/gateway.yaml" --workers "$WORKERS")
        ;;
    esac
}

# ---- one measured run
printf 'round\ttarget\treq_s\tsucceeded\tfailed\tmean_ms\tp50_ms\tp99_ms\tproxy_cpu_pct\tproxy_us_per_req\tupstream_cpu_pct\trest_cpu_pct\tupstream_conns\n' >"$WORK/runs.tsv"
URL_PATH=/hello
measure() { # TARGET ROUND
    local t=$1 r=$2 tag="r$2-$1"
    configure "$t"
    spawn "$WORK/$t/$tag.log" "${ON_PROXY[@]}" "${CMD[@]}"
    local pid=$SPAWNED url="http://127.0.0.1:$PORT$URL_PATH"
    if ! wait_listening "$PORT" "$pid"; then
        echo "$t did not start; the end of its log:" >&2
        tail -n 20 "$WORK/$t/$tag.log" >&2
        exit 1
    fi
    local smoke
    smoke=$(timeout 30 h2load -n 20 -c 1 -m 1 "$url" 2>&1 || true)
    if ! grep -q '^requests: 20 total, 20 started, 20 done, 20 succeeded' <<<"$smoke" ||
        ! grep -q '^status codes: 20 2xx' <<<"$smoke" ||
        ! grep -qE "^traffic: .*\\($((20 * 64))\\) data" <<<"$smoke"; then
        echo "$t failed the smoke test (20 requests, each 2xx with the upstream's 64 bytes):" >&2
        echo "$smoke" | tail -n 12 >&2
        exit 1
    fi
    local raw="$WORK/$t/$tag.h2load.txt" reqlog="$WORK/$t/$tag.requests.tsv"
    timeout $((SECS + WARMUP + 60)) "${ON_REST[@]}" h2load -t 1 -c "$CONNS" -m "$STREAMS" -D "$SECS" --warm-up-time "$WARMUP" \
        --log-file="$reqlog" "$url" >"$raw" 2>&1 &
    local load=$!
    # The measured window starts when the warm-up ends.
    sleep "$WARMUP"
    local t0 b0 p0 u0 t1 b1 p1 u1
    t0=$(date +%s.%N); b0=$(busy_ticks); read -r p0 u0 < <(session_ticks "$pid" "$UPSTREAM_PID")
    wait "$load" || echo "h2load exited with status $? for $tag (see $raw)" >&2
    t1=$(date +%s.%N); b1=$(busy_ticks); read -r p1 u1 < <(session_ticks "$pid" "$UPSTREAM_PID")
    local conns
    conns=$(ss -Htn state established "( dport = :$UP )" | wc -l)
    stop "$pid"
    python3 - "$raw" "$reqlog" "$r" "$t" "$t0" "$t1" "$b0" "$b1" "$p0" "$p1" "$u0" "$u1" "$HZ" "$conns" >>"$WORK/runs.tsv" <<'PY'
import re, sys
raw, reqlog, rnd, target = sys.argv[1:5]
t0, t1 = float(sys.argv[5]), float(sys.argv[6])
b0, b1, p0, p1, u0, u1, hz = (int(x) for x in sys.argv[7:14])
conns = sys.argv[14]
text = open(raw).read()
rps = float(re.search(r"finished in [^,]+, ([0-9.]+) req/s", text).group(1))
req = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
ok, failed = int(req.group(1)), sum(int(req.group(i)) for i in (2, 3, 4))
codes = re.search(r"status codes: \d+ 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
failed += sum(int(codes.group(i)) for i in (1, 2, 3))
times = sorted(int(line.split("\t")[2]) for line in open(reqlog) if line.count("\t") >= 2)
def pct(q):
    return times[min(len(times) - 1, int(q * len(times)))] / 1000 if times else float("nan")
mean = sum(times) / len(times) / 1000 if times else float("nan")
window = max(t1 - t0, 1e-9)
proxy = (p1 - p0) / hz / window * 100
upstream = (u1 - u0) / hz / window * 100
rest = max(0.0, (b1 - b0) / hz / window * 100 - proxy - upstream)
us_per_req = proxy / 100 * 1e6 / rps if rps > 0 else float("nan")
print("\t".join([rnd, target, f"{rps:.0f}", str(ok), str(failed), f"{mean:.2f}", f"{pct(0.5):.2f}", f"{pct(0.99):.2f}",
                 f"{proxy:.0f}", f"{us_per_req:.1f}", f"{upstream:.0f}", f"{rest:.0f}", conns]))
PY
    rm -f "$reqlog"
    tail -n 1 "$WORK/runs.tsv" | awk -F'\t' '{ printf "  %-10s round %s: %7d req/s, proxy %s µs/req, p99 %s ms, failed %s\n", $2, $1, $3, $10, $8, $5 }' >&2
}

{
    echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M')"
    echo "host: $(uname -sr), $(nproc) CPUs, load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "versions: $(nghttpx --version 2>&1 | head -n 1); $(haproxy -v 2>&1 | head -n 1 | cut -d' ' -f1-3); $(nginx -v 2>&1 | sed 's/^nginx version: //'); $(h2load --version 2>&1 | head -n 1)"
    echo "command: Benchmarks/side-by-side.sh -r $ROUNDS -d $SECS -w $WARMUP -c $CONNS -m $STREAMS -W $WORKERS$([ "$PIN" = 1 ] && echo ' --pin') ${TARGETS[*]}"
} | tee "$WORK/env.txt" >&2
for r in $(seq "$ROUNDS"); do
    for t in "${TARGETS[@]}"; do measure "$t" "$r"; done
done
stop "$UPSTREAM_PID"

python3 - "$WORK/runs.tsv" "$ANCHOR" "${TARGETS[@]}" <<'PY' | tee "$WORK/summary.md"
import statistics, sys
path, anchor, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = [line.rstrip("\n").split("\t") for line in open(path)]
head, rows = rows[0], rows[1:]
col = {name: i for i, name in enumerate(head)}
def values(target, name):
    return [float(r[col[name]]) for r in rows if r[col["target"]] == target]
med = {t: {n: statistics.median(values(t, n)) for n in ("req_s", "proxy_us_per_req", "mean_ms", "p99_ms", "proxy_cpu_pct", "rest_cpu_pct")}
       for t in targets if values(t, "req_s")}
base = med.get(anchor)
print(f"| target | req/s (median) | min..max | req/s vs {anchor} | proxy µs/req | µs/req vs {anchor} | mean ms | p99 ms | proxy CPU % | rest CPU % | failed |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for t in targets:
    if t not in med:
        continue
    m, rps = med[t], values(t, "req_s")
    ratio = f"{m['req_s'] / base['req_s']:.2f}" if base else "–"
    cost = f"{m['proxy_us_per_req'] / base['proxy_us_per_req']:.2f}" if base else "–"
    failed = int(sum(values(t, "failed")))
    print(f"| {t} | {m['req_s']:,.0f} | {min(rps):,.0f}..{max(rps):,.0f} | {ratio} | {m['proxy_us_per_req']:.1f} | {cost} | "
          f"{m['mean_ms']:.2f} | {m['p99_ms']:.2f} | {m['proxy_cpu_pct']:.0f} | {m['rest_cpu_pct']:.0f} | {failed} |")
PY
echo "runs: $WORK/runs.tsv; h2load output and logs: $WORK/<target>/" >&2
