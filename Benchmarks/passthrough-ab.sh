#!/usr/bin/env bash
# A/B of two gateway builds on the passthrough path: the same nginx upstream
# and h2load, the two binaries alternated, ROUNDS rounds; prints requests/s
# and gateway CPU microseconds per request for each run.
#
#   Benchmarks/passthrough-ab.sh OLD_ASSERTGATE NEW_ASSERTGATE [rounds=3]
#
# 32 streams in flight (h2load -c 4 -m 8) from one address: under half of the
# upstream pool, so neither build queues for connections. Pinned like
# gateway-ab.sh: the gateway alone on CPU 1, nginx, Redis and h2load on CPU 0.
set -u
A=${1:?old assertgate binary}; B=${2:?new assertgate binary}; ROUNDS=${3:-3}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ON_REST="taskset -c 0"
. "$ROOT/Benchmarks/bench-env.sh"
cpu_ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
for i in $(seq $ROUNDS); do for G in A B; do
  GWBIN=$([ $G = A ] && echo $A || echo $B)
  taskset -c 1 $GWBIN serve --config $WORK/gw.yaml --workers 1 >$WORK/gw-$G.log 2>&1 & GWPID=$!
  wait_ready
  taskset -c 0 h2load -c 4 -m 8 -D 2 http://127.0.0.1:$GP/open/x >/dev/null 2>&1   # warm-up
  t0=$(cpu_ticks $GWPID)
  out=$(taskset -c 0 h2load -c 4 -m 8 -D 8 http://127.0.0.1:$GP/open/x 2>/dev/null)
  t1=$(cpu_ticks $GWPID)
  python3 - "$G" "$out" "$t0" "$t1" "$(getconf CLK_TCK)" <<'PY'
import re, sys
g, out, t0, t1, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out).group(2))
rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out).group(1))
print("%s %8.0f req/s  %5.1f us gateway CPU per request  (%d ok)" % (g, rps, (t1 - t0) / hz * 1e6 / max(1, done), done))
PY
  kill $GWPID; wait $GWPID 2>/dev/null
done; done
