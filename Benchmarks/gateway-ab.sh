#!/usr/bin/env bash
# A/B of two gateway builds on the asserted path: the same nginx, Redis and
# load tool, the two binaries alternated, asserted saturation only; prints
# requests/s and asserted requests per gateway CPU-second for each run.
#
#   Benchmarks/gateway-ab.sh OLD_ASSERTGATE NEW_ASSERTGATE [rounds=3]
#
# Pinned like enforcement.sh: the gateway alone on CPU 1, the rest on CPU 0.
set -u
A=${1:?old assertgate binary}; B=${2:?new assertgate binary}; ROUNDS=${3:-3}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEV="$(cd "$ROOT" && swift build -c release --show-bin-path)/assertgate-device"
WORK=$(mktemp -d /tmp/ab.XXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
UP=$(free_port); RP=$(free_port); GP=$(free_port); AP=$(free_port)
mkdir -p $WORK/nginx/logs
cat >$WORK/nginx/nginx.conf <<NG
worker_processes 1; error_log $WORK/nginx/logs/error.log warn; pid $WORK/nginx/nginx.pid;
events { worker_connections 16384; }
http { access_log off; keepalive_requests 1000000; keepalive_timeout 120s;
  server { listen 127.0.0.1:$UP; location / { default_type application/json; return 200 '{"ok":true,"padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}\n'; } } }
NG
taskset -c 0 nginx -p $WORK/nginx -c $WORK/nginx/nginx.conf -g 'daemon off;' & NGP=$!
taskset -c 0 redis-server --port $RP --bind 127.0.0.1 --save '' --appendonly no --logfile $WORK/redis.log & RDP=$!
$DEV init-ca --state $WORK/device >/dev/null 2>&1
cat >$WORK/gw.yaml <<YAML
listeners: [{address: 127.0.0.1:$GP}]
admin: {address: 127.0.0.1:$AP}
apps: [{appId: ABCDE12345.com.example.app, environments: [development]}]
attestation:
  trustAnchors: [$WORK/device/ca/root.cert.pem]
  receiptTrustAnchors: [$WORK/device/ca/receipt-root.cert.pem]
  challengeRate: {perSecond: 100000, burst: 100000}
store: {redis: {url: "redis://127.0.0.1:$RP/0"}}
upstreams: {api: {endpoints: [http://127.0.0.1:$UP]}}
routes:
  - {match: {prefix: /api/}, upstream: api, mode: enforce}
  - {match: {prefix: /open/}, upstream: api, mode: passthrough}
logging: {level: warning, format: text}
YAML
for i in $(seq $ROUNDS); do for G in A B; do
  BIN=$([ $G = A ] && echo $A || echo $B)
  taskset -c 1 $BIN serve --config $WORK/gw.yaml --workers 1 >$WORK/gw-$G.log 2>&1 & GWPID=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:$AP/readyz >/dev/null && break; sleep 0.1; done
  taskset -c 0 $DEV load --gateway http://127.0.0.1:$GP --state $WORK/device --path /api/hello --connections 4 --streams 16 --duration 6 --warmup 2 --threads 1 --cpu-pid $GWPID --json 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin); print('$G', round(r['requestsPerSecond']), round(r['requests']/r['targetCPUSeconds']), 'per cpu-s')"
  kill $GWPID; wait $GWPID 2>/dev/null
done; done
kill $NGP $RDP; wait 2>/dev/null
