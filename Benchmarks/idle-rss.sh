#!/usr/bin/env bash
# Memory held by idle HTTP/2 connections, and given back after them: ROUNDS
# rounds of N idle h2c connections (Benchmarks/idle_conns.py) against the
# gateway and against nghttpx in the same run, each in front of the same
# nginx. Prints per round the RSS with the connections open and after they
# closed, and per connection.
#
#   Benchmarks/idle-rss.sh [N=5000] [ROUNDS=7]
#
# Needs a release build (swift build -c release --product assertgate and
# --product assertgate-device, for Benchmarks/bench-env.sh) and nghttpx
# (Debian: nghttp2-proxy), nginx, redis-server.
set -u
N=${1:-5000}; ROUNDS=${2:-7}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
command -v nghttpx >/dev/null || { echo "nghttpx missing: apt-get install nghttp2-proxy" >&2; exit 2; }
ulimit -n 65536 2>/dev/null || true
# The bench's environment: nginx as the upstream on $UP, free ports, cleanup
# (its Redis and device CA go unused here).
ON_REST=""
. "$ROOT/Benchmarks/bench-env.sh"
GWBIN="${ASSERTGATE_BIN:-$BIN/assertgate}"
NP=$(free_port)
cat >"$WORK/gw-idle.yaml" <<YAML
listeners: [{address: 127.0.0.1:$GP, idleTimeout: 600s}]
admin: {address: 127.0.0.1:$AP}
apps: [{appId: ABCDE12345.com.example.app}]
store: {memory: {}}
upstreams: {api: {endpoints: [http://127.0.0.1:$UP]}}
routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]
logging: {level: warning, format: text}
YAML
"$GWBIN" serve --config "$WORK/gw-idle.yaml" --workers 1 >"$WORK/gw.log" 2>&1 & GW=$!; pids+=($GW)
nghttpx --frontend="127.0.0.1,$NP;no-tls" --backend="127.0.0.1,$UP" -n 1 --frontend-read-timeout=600s \
  --frontend-keep-alive-timeout=600s --worker-frontend-connections=100000 --no-ocsp --conf=/dev/null \
  --log-level=WARN --errorlog-file="$WORK/nghttpx.log" & NX=$!; pids+=($NX)
for _ in $(seq 100); do curl -sf --http2-prior-knowledge "http://127.0.0.1:$GP/" >/dev/null && curl -sf --http2-prior-knowledge "http://127.0.0.1:$NP/" >/dev/null && break; sleep 0.1; done
# nghttpx forks a worker: measure the process that holds the connections.
NXW=$(pgrep -P $NX | head -1); NXW=${NXW:-$NX}
echo "# $N idle h2c connections x $ROUNDS rounds; RSS in MiB (open / after close), per connection in KiB"
for T in assertgate nghttpx; do
  if [ $T = assertgate ]; then PORT=$GP; PID=$GW; else PORT=$NP; PID=$NXW; fi
  python3 "$ROOT/Benchmarks/idle_conns.py" $PORT $PID $N $ROUNDS | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    per = (r['open_kib'] - r['baseline_kib']) / max(1, r['answered'])
    print('$T round %d: answered %d, baseline %.0f MiB, open %.0f MiB, after close %.0f MiB, %.1f KiB per connection' % (
        r['round'], r['answered'], r['baseline_kib'] / 1024, r['open_kib'] / 1024, r['closed_kib'] / 1024, per))
"
done
