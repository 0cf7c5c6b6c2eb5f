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
ON_REST="taskset -c 0"
. "$ROOT/Benchmarks/bench-env.sh"
for i in $(seq $ROUNDS); do for G in A B; do
  GWBIN=$([ $G = A ] && echo $A || echo $B)
  taskset -c 1 $GWBIN serve --config $WORK/gw.yaml --workers 1 >$WORK/gw-$G.log 2>&1 & GWPID=$!
  wait_ready
  taskset -c 0 $DEV load --gateway http://127.0.0.1:$GP --state $WORK/device --path /api/hello --connections 4 --streams 16 --duration 6 --warmup 2 --threads 1 --cpu-pid $GWPID --json 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin); print('$G', round(r['requestsPerSecond']), round(r['requests']/r['targetCPUSeconds']), 'per cpu-s')"
  kill $GWPID; wait $GWPID 2>/dev/null
done; done
