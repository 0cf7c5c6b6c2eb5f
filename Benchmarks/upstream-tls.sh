#!/usr/bin/env bash
# What TLS to the upstream costs: the same passthrough route through the
# gateway to the same nginx, once over http:// and once over https:// (TLS 1.3,
# P-256 certificate from a throw-away CA, kept-alive connections), alternated.
#
#   Benchmarks/upstream-tls.sh [rounds=3] [seconds=8]
#
# Gateway alone on CPU 1 (one worker); nginx and h2load on CPU 0; h2load
# -c 32 -m 32, no warm-up (the CPU counts the upstream handshakes). Prints, per
# run, h2load's requests/s and the gateway's CPU µs per request, and the
# upstream TLS connections open at the end (kept alive: far fewer than
# requests, so handshakes are not paid per request).
set -euo pipefail
ROUNDS="${1:-3}"; SECS="${2:-8}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PKI="$(mktemp -d /tmp/assertgate-upstream-tls.XXXXXX)"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1)
openssl req -x509 "${ec[@]}" -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=bench CA" 2>/dev/null
openssl req -x509 -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" "${ec[@]}" -keyout "$PKI/up.key" -out "$PKI/up.crt" \
    -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
UPS=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
# The bench's nginx, Redis and ports (bench-env.sh), with a TLS 1.3 listener added.
NGINX_EXTRA="listen 127.0.0.1:$UPS ssl; ssl_certificate $PKI/up.crt; ssl_certificate_key $PKI/up.key; ssl_protocols TLSv1.3;"
ON_REST="taskset -c 0"
. "$ROOT/Benchmarks/bench-env.sh"
GW="$BIN/assertgate"
[ -x "$GW" ] || { echo "build first: swift build -c release --product assertgate" >&2; exit 2; }
cat >"$WORK/gw-tls.yaml" <<YAML
listeners: [{address: 127.0.0.1:$GP}]
admin: {address: 127.0.0.1:$AP}
apps: [{appId: ABCDE12345.com.example.app}]
store: {memory: {}}
upstreams:
  plain: {endpoints: [http://127.0.0.1:$UP], maxConnectionsPerEndpoint: 1024}
  tls: {endpoints: [https://127.0.0.1:$UPS], tls: {caFile: $PKI/ca.crt}, maxConnectionsPerEndpoint: 1024}
routes:
  - {match: {prefix: /plain/}, upstream: plain, mode: passthrough}
  - {match: {prefix: /tls/}, upstream: tls, mode: passthrough}
logging: {level: warning, format: text}
YAML
taskset -c 1 "$GW" serve --config "$WORK/gw-tls.yaml" --workers 1 >"$WORK/gateway.log" 2>&1 & GWPID=$!; pids+=($GWPID)
wait_ready
cpu() { awk '{print $14 + $15}' "/proc/$GWPID/stat"; }
hz=$(getconf CLK_TCK)
echo "| run | requests/s | gateway µs/request | upstream connections open |"
echo "|---|---|---|---|"
for i in $(seq "$ROUNDS"); do
    for route in plain tls; do
        port=$([ $route = plain ] && echo $UP || echo $UPS)
        before=$(cpu)
        out=$(taskset -c 0 h2load -t 1 -c 32 -m 32 -D "$SECS" "http://127.0.0.1:$GP/$route/hello" 2>&1)
        after=$(cpu)
        rps=$(echo "$out" | awk '/^finished in/ {print int($4)}')
        done_=$(echo "$out" | awk '/^requests:/ {print $8}')
        conns=$(ss -Htn state established "( dport = :$port )" | wc -l)
        us=$(python3 -c "print(round(($after - $before) / $hz / max(1, $done_) * 1e6, 1))")
        echo "| $route-$i | $rps | $us | $conns |"
    done
done
echo
echo "raw: $WORK"
