# Sourced by enforcement.sh and gateway-ab.sh: the environment both measure
# in. Expects ROOT, and ON_REST (a prefix such as "taskset -c 0", or empty).
# Sets WORK, DEV, UP/RP/GP/AP (free loopback ports) and pids (for cleanup);
# starts nginx (the upstream) and redis-server, creates the device CAs and
# writes $WORK/gw.yaml (/api/ enforced, /open/ passthrough). NGINX_EXTRA: more
# directives for nginx's server block (another listen, say).

. "$ROOT/Benchmarks/bench-base.sh"   # WORK, BIN, free_port, pids and their cleanup
DEV="$BIN/assertgate-device"
[ -x "$DEV" ] || { echo "build first: swift build -c release --product assertgate && swift build -c release --product assertgate-device" >&2; exit 2; }

UP=$(free_port); RP=$(free_port); GP=$(free_port); AP=$(free_port)

# Upstream: nginx, 1 worker, keep-alive: the "legacy API" of side-by-side.sh.
. "$ROOT/Benchmarks/nginx-upstream.sh"
nginx_upstream_conf "$WORK/nginx" "$UP" "${NGINX_EXTRA:-}
        location / { default_type application/json; return 200 '{\"ok\":true,\"padding\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\\n'; }"
$ON_REST nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' & pids+=($!)
$ON_REST redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --logfile "$WORK/redis.log" & pids+=($!)
"$DEV" init-ca --state "$WORK/device" >/dev/null 2>&1
# STORE_YAML: another store: line (e.g. a Redis Cluster's seeds) instead of the bench's own Redis.
STORE_LINE="${STORE_YAML:-}"
[ -n "$STORE_LINE" ] || STORE_LINE="{redis: {url: \"redis://127.0.0.1:$RP/0\"}}"
cat >"$WORK/gw.yaml" <<YAML
listeners: [{address: 127.0.0.1:$GP}]
admin: {address: 127.0.0.1:$AP}
apps: [{appId: ABCDE12345.com.example.app, environments: [development]}]
attestation:
  trustAnchors: [$WORK/device/ca/root.cert.pem]
  receiptTrustAnchors: [$WORK/device/ca/receipt-root.cert.pem]
  challengeRate: {perSecond: 100000, burst: 100000}
store: $STORE_LINE
upstreams: {api: {endpoints: [http://127.0.0.1:$UP]}}
routes:
  - {match: {prefix: /api/}, upstream: api, mode: enforce}
  - {match: {prefix: /open/}, upstream: api, mode: passthrough}
logging: {level: warning, format: text}
YAML

# wait_ready: until the gateway's /readyz answers (every worker's Redis up).
wait_ready() { for _ in $(seq 100); do curl -sf "http://127.0.0.1:$AP/readyz" >/dev/null && return 0; sleep 0.1; done; return 1; }
