#!/usr/bin/env bash
# What risk rules (risk.md §2) cost on the asserted path: one gateway binary,
# the same nginx, Redis and load tool, two configs alternated — no rules, and
# five rules on the app (every one evaluated on every request, all passing) —
# asserted saturation only. Prints requests/s and asserted requests per
# gateway CPU-second for each run, and Redis' EVALSHA count per request.
#
#   Benchmarks/rules-cost.sh [rounds=3]
#
# Pinned like enforcement.sh: the gateway alone on CPU 1, the rest on CPU 0.
set -u
ROUNDS=${1:-3}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ON_REST="taskset -c 0"
. "$ROOT/Benchmarks/bench-env.sh"
GW="$BIN/assertgate"
python3 - "$WORK/gw.yaml" "$WORK/gw-rules.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
rules = ('rules: {require: {launchCategories: [app-store, testflight, missing], minAppVersion: "1.0", '
         'maxUserKeys: 3, maxRiskMetric: 50}, flag: {environments: [development]}}')
old = "environments: [development]}]"
assert old in text
open(sys.argv[2], "w").write(text.replace(old, "environments: [development], " + rules + "}]", 1))
PY
for i in $(seq $ROUNDS); do for C in none rules; do
  CONF=$([ $C = none ] && echo $WORK/gw.yaml || echo $WORK/gw-rules.yaml)
  taskset -c 1 $GW serve --config $CONF --workers 1 >$WORK/gw-$C.log 2>&1 & GWPID=$!
  wait_ready
  redis-cli -p $RP CONFIG RESETSTAT >/dev/null
  taskset -c 0 $DEV load --gateway http://127.0.0.1:$GP --state $WORK/device --path /api/hello --connections 4 --streams 16 --duration 6 --warmup 2 --threads 1 --cpu-pid $GWPID --json 2>/dev/null >$WORK/run.json
  EVALSHA=$(redis-cli -p $RP INFO commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
  python3 -c "import json; r=json.load(open('$WORK/run.json')); print('$C', round(r['requestsPerSecond']), round(r['requests']/r['targetCPUSeconds']), 'per cpu-s;', 'evalsha', '$EVALSHA')"
  kill $GWPID; wait $GWPID 2>/dev/null
done; done
