#!/usr/bin/env bash
# Memory a TLS connection keeps after one large response: N HTTP/2-over-TLS
# connections each download SIZE bytes once (Benchmarks/tls_held_conns.py)
# and stay open; the gateway's RSS with them held, less its RSS before, per
# connection. The same with cleartext h2c is not run: it holds no TLS buffers.
# OLD_ASSERTGATE=<binary> measures an earlier build the same way, first.
#
#   Benchmarks/tls-held-memory.sh [N=100] [SIZE=2097152]
#
# Needs a release build (swift build -c release --product assertgate),
# openssl, python3 and python3-h2 (Debian's, run by /usr/bin/python3).
set -u
N=${1:-100}; SIZE=${2:-2097152}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK_NAME=tls-held
. "$ROOT/Benchmarks/bench-base.sh"
mkdir -p "$WORK/www"
head -c "$SIZE" /dev/zero >"$WORK/www/big.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
  -keyout "$WORK/tls.key" -out "$WORK/tls.crt" >/dev/null 2>&1
UP=$(free_port)
(cd "$WORK/www" && exec python3 -m http.server "$UP" --bind 127.0.0.1 >/dev/null 2>&1) & pids+=($!)
measure() {  # name binary
  local gp ap gw before held
  gp=$(free_port); ap=$(free_port)
  passthrough_yaml "address: 127.0.0.1:$gp, tls: {certificate: $WORK/tls.crt, privateKey: $WORK/tls.key}, idleTimeout: 600s" \
    "$ap" "http://127.0.0.1:$UP" >"$WORK/gw-$1.yaml"
  "$2" serve --config "$WORK/gw-$1.yaml" --workers 1 >"$WORK/gw-$1.log" 2>&1 & gw=$!; pids+=($gw)
  for _ in $(seq 100); do curl -skf "https://127.0.0.1:$gp/big.bin" -o /dev/null && break; sleep 0.1; done
  before=$(awk '/VmRSS/{print $2}' "/proc/$gw/status")
  coproc HOLD { /usr/bin/python3 "$ROOT/Benchmarks/tls_held_conns.py" "$gp" "$N" /big.bin; }
  read -r line <&"${HOLD[0]}"
  held=$(awk '/VmRSS/{print $2}' "/proc/$gw/status")
  echo "go" >&"${HOLD[1]}"
  wait "$HOLD_PID" 2>/dev/null
  echo "$1: $line; RSS before $before KiB, with them held $held KiB: $(( (held - before) / N )) KiB a connection"
  kill -TERM "$gw"; wait "$gw" 2>/dev/null
}
[ -n "${OLD_ASSERTGATE:-}" ] && measure assertgate-old "$OLD_ASSERTGATE"
measure assertgate "${ASSERTGATE_BIN:-$BIN/assertgate}"
