#!/usr/bin/env bash
# A request body sent a byte a frame: the proxy's CPU for COUNT 1-byte DATA
# frames on one stream, beside 64 x COUNT bytes in 16 KiB frames, for the
# gateway and nghttpx (the anchor) in front of the same upstream, ROUNDS rounds
# alternated. CPU is the proxy process's user + system time from /proc
# (10 ms ticks), read before and after each upload (Benchmarks/tiny_frames.py).
# OLD_ASSERTGATE=<binary> adds an earlier build as "assertgate-old".
#
#   Benchmarks/tiny-frames.sh [COUNT=1000000] [ROUNDS=3]
#
# Needs a release build (swift build -c release --product assertgate),
# nghttpx (Debian: nghttp2-proxy) and python3-h2 (Debian's, run by /usr/bin/python3).
set -u
COUNT=${1:-1000000}; ROUNDS=${2:-3}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
command -v nghttpx >/dev/null || { echo "nghttpx missing: apt-get install nghttp2-proxy" >&2; exit 2; }
WORK_NAME=tiny-frames
. "$ROOT/Benchmarks/bench-base.sh"
# The upstream reads every body before it answers (nginx's `return` answers
# at the head, and the upload would end there): the quickstart's demo API.
UP=$(free_port); GP=$(free_port); AP=$(free_port)
python3 "$ROOT/deploy/demo-upstream.py" "$UP" >"$WORK/upstream.log" 2>&1 & pids+=($!)
TICK=$(getconf CLK_TCK)
start_gateway() {  # binary port admin-port; sets STARTED (run in this shell: pids must see it)
  passthrough_yaml "address: 127.0.0.1:$2" "$3" "http://127.0.0.1:$UP" "limits: {maxRequestBodyBytes: 1GiB}" >"$WORK/gw-$2.yaml"
  "$1" serve --config "$WORK/gw-$2.yaml" --workers 1 >"$WORK/gw-$2.log" 2>&1 & pids+=($!)
  STARTED=$!
}
declare -A PORT PID
PORT[assertgate]=$GP; start_gateway "${ASSERTGATE_BIN:-$BIN/assertgate}" $GP $AP; PID[assertgate]=$STARTED
TARGETS="nghttpx assertgate"
if [ -n "${OLD_ASSERTGATE:-}" ]; then
  PORT[assertgate-old]=$(free_port); start_gateway "$OLD_ASSERTGATE" ${PORT[assertgate-old]} $(free_port); PID[assertgate-old]=$STARTED
  TARGETS="$TARGETS assertgate-old"
fi
PORT[nghttpx]=$(free_port)
nghttpx --frontend="127.0.0.1,${PORT[nghttpx]};no-tls" --backend="127.0.0.1,$UP" -n 1 --no-ocsp --conf=/dev/null \
  --log-level=WARN --errorlog-file="$WORK/nghttpx.log" --accesslog-file=/dev/null & NX=$!; pids+=($NX)
for t in $TARGETS; do
  for _ in $(seq 100); do curl -sf --http2-prior-knowledge "http://127.0.0.1:${PORT[$t]}/" >/dev/null && break; sleep 0.1; done
done
# nghttpx forks a worker: measure the process that holds the connections.
NXW=$(pgrep -P $NX | head -1); PID[nghttpx]=${NXW:-$NX}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
BIG=16384
echo "# one stream: $COUNT bytes in 1-byte DATA frames, and 64 times as many bytes in $BIG-byte frames; proxy CPU (user + system)"
for r in $(seq "$ROUNDS"); do
  for t in $TARGETS; do
    for size in 1 $BIG; do
      n=$COUNT; [ $size = 1 ] || n=$(( COUNT * 64 / BIG ))
      a=$(cpu ${PID[$t]})
      out=$(/usr/bin/python3 "$ROOT/Benchmarks/tiny_frames.py" ${PORT[$t]} $n $size /upload)
      b=$(cpu ${PID[$t]})
      python3 -c "
import json; o = json.loads('$out'); ms = ($b - $a) * 1000 / $TICK
print('round $r %-14s %5d-byte frames: status %s, %8.0f ms of proxy CPU, %6.3f us a frame, client %.1f s' % (
    '$t', $size, o['status'], ms, ms * 1000 / max(1, o['frames']), o['seconds']))"
    done
  done
done
