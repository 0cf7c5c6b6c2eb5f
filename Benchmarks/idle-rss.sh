#!/usr/bin/env bash
# Memory held by idle HTTP/2 connections, and given back after them: ROUNDS
# rounds of N idle h2c connections (Benchmarks/idle_conns.py) against the
# gateway and against nghttpx in the same run, each in front of the same
# nginx. Prints per round the RSS with the connections open and after they
# closed, and per connection.
#
#   Benchmarks/idle-rss.sh [N=5000] [ROUNDS=7]
#
# Needs a release build (swift build -c release --product assertgate) and
# nghttpx (Debian: nghttp2-proxy), nginx.
set -u
N=${1:-5000}; ROUNDS=${2:-7}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${ASSERTGATE_BIN:-$(cd "$ROOT" && swift build -c release --show-bin-path)/assertgate}"
[ -x "$BIN" ] || { echo "build first: swift build -c release --product assertgate" >&2; exit 2; }
command -v nghttpx >/dev/null || { echo "nghttpx missing: apt-get install nghttp2-proxy" >&2; exit 2; }
ulimit -n 65536 2>/dev/null || true
WORK="$(mktemp -d /tmp/assertgate-rss.XXXXXX)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
UP=$(free_port); GP=$(free_port); AP=$(free_port); NP=$(free_port)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/nginx/logs"
cat >"$WORK/nginx/nginx.conf" <<NG
worker_processes 1;
error_log $WORK/nginx/logs/error.log warn;
pid $WORK/nginx/nginx.pid;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$UP; location / { return 200 "ok\n"; } } }
NG
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' & pids+=($!)
cat >"$WORK/gw.yaml" <<YAML
listeners: [{address: 127.0.0.1:$GP, idleTimeout: 600s}]
admin: {address: 127.0.0.1:$AP}
apps: [{appId: ABCDE12345.com.example.app}]
store: {memory: {}}
upstreams: {api: {endpoints: [http://127.0.0.1:$UP]}}
routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]
logging: {level: warning, format: text}
YAML
"$BIN" serve --config "$WORK/gw.yaml" --workers 1 >"$WORK/gw.log" 2>&1 & GW=$!; pids+=($GW)
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
