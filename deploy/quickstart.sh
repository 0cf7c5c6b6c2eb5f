#!/usr/bin/env bash
# AssertGate quickstart: on a fresh Debian 12 machine, installs what is
# missing, builds the gateway and the device simulator, starts Redis on
# loopback, a demo upstream that echoes the headers it receives, and the
# gateway, then plays an app through attest -> asserted request -> replay and
# shows the trust headers and the rejection. Everything listens on 127.0.0.1.
#
#   deploy/quickstart.sh          set up, run, demo; leaves the three services running
#   deploy/quickstart.sh stop     stops them (by the PIDs it recorded)
#
# Ports (override in the environment): GATEWAY_PORT=8080 ADMIN_PORT=9901
# UPSTREAM_PORT=9001 REDIS_PORT=6390. State, logs and configs: deploy/run/.
#
# The demo device is a software device (DeviceSim) with its own test CA: the
# gateway is configured to trust that CA instead of Apple's roots. Never do
# that in production (see deploy/production.yaml).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN="$ROOT/deploy/run"
GATEWAY_PORT="${GATEWAY_PORT:-8080}"
ADMIN_PORT="${ADMIN_PORT:-9901}"
UPSTREAM_PORT="${UPSTREAM_PORT:-9001}"
REDIS_PORT="${REDIS_PORT:-6390}"
ADMIN_TOKEN="quickstart-admin-token"
APP_ID="ABCDE12345.com.example.app"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

stop_all() {
    for name in gateway upstream redis; do
        pidfile="$RUN/$name.pid"
        [ -f "$pidfile" ] || continue
        pid="$(cat "$pidfile")"
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
            echo "stopped $name (pid $pid)"
        fi
        rm -f "$pidfile"
    done
}

if [ "${1:-}" = "stop" ]; then
    stop_all
    exit 0
fi

# Waits (bounded) until a command succeeds: external processes starting up.
wait_for() {
    local what="$1"; shift
    for _ in $(seq 100); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    echo "timed out waiting for $what" >&2
    return 1
}

say "1/6 system packages"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
for pkg in libssl-dev libnghttp2-dev libhiredis-dev redis-server curl python3 pkg-config; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "installing: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
else
    echo "all present"
fi
if ! command -v swift >/dev/null 2>&1; then
    cat >&2 <<'EOF'
Swift 6 is not installed. Debian 12 has no Swift package: install the
toolchain from swift.org (or the swiftlang/swift Debian 12 image), put its
usr/bin on PATH, and run this script again.
EOF
    exit 1
fi

say "2/6 build (release)"
cd "$ROOT"
swift build -c release --product assertgate 2>&1 | tail -n 1
swift build -c release --product assertgate-device 2>&1 | tail -n 1
BIN="$(swift build -c release --show-bin-path)"
GW="$BIN/assertgate"
DEVICE="$BIN/assertgate-device"

stop_all
mkdir -p "$RUN"
rm -rf "$RUN/device"

say "3/6 Redis on 127.0.0.1:$REDIS_PORT and the demo upstream on 127.0.0.1:$UPSTREAM_PORT"
setsid redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no --logfile "$RUN/redis.log" </dev/null >/dev/null 2>&1 &
echo $! >"$RUN/redis.pid"
wait_for "redis" redis-cli -p "$REDIS_PORT" ping
setsid python3 "$ROOT/deploy/demo-upstream.py" "$UPSTREAM_PORT" </dev/null >"$RUN/upstream.log" 2>&1 &
echo $! >"$RUN/upstream.pid"
wait_for "demo upstream" curl -sf "http://127.0.0.1:$UPSTREAM_PORT/"

say "4/6 test CA for the simulated device, gateway config"
"$DEVICE" init-ca --state "$RUN/device"
cat >"$RUN/quickstart.yaml" <<EOF
# Written by deploy/quickstart.sh. See deploy/production.yaml for a real setup.
listeners: [{address: 127.0.0.1:$GATEWAY_PORT}]
admin: {address: 127.0.0.1:$ADMIN_PORT, token: $ADMIN_TOKEN}
apps: [{appId: $APP_ID, environments: [development]}]
attestation:
  # The simulated device's test CA replaces Apple's roots (demo only!).
  trustAnchors: [$RUN/device/ca/root.cert.pem]
  receiptTrustAnchors: [$RUN/device/ca/receipt-root.cert.pem]
store: {redis: {url: "redis://127.0.0.1:$REDIS_PORT/0"}}
trust: {signingSecret: quickstart-signing-secret}
upstreams: {api: {endpoints: [http://127.0.0.1:$UPSTREAM_PORT]}}
routes:
  - {match: {prefix: /api/monitor/}, upstream: api, mode: monitor}
  - {match: {prefix: /api/}, upstream: api, mode: enforce}
  - {match: {prefix: /}, upstream: api, mode: passthrough}
logging: {level: info, format: text}
EOF
"$GW" check-config "$RUN/quickstart.yaml" | tail -n 1

say "5/6 the gateway on 127.0.0.1:$GATEWAY_PORT (admin 127.0.0.1:$ADMIN_PORT)"
setsid "$GW" serve --config "$RUN/quickstart.yaml" </dev/null >"$RUN/gateway.log" 2>&1 &
echo $! >"$RUN/gateway.pid"
wait_for "gateway readiness" curl -sf "http://127.0.0.1:$ADMIN_PORT/readyz"

say "6/6 demo: attest, asserted requests, replay"
OPTS="--gateway http://127.0.0.1:$GATEWAY_PORT --state $RUN/device"
echo "\$ assertgate-device attest --user-id alice"
"$DEVICE" attest --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device" --user-id alice
echo
echo "\$ assertgate-device request POST /api/orders --body '{\"item\":42}'   (the upstream echoes what it received)"
"$DEVICE" request POST /api/orders --body '{"item":42}' --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device"
echo
echo "\$ assertgate-device request POST /api/orders --body '{\"item\":42}' --replay   (same assertion again)"
"$DEVICE" request POST /api/orders --body '{"item":42}' --replay \
    --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device" || true
echo
echo "\$ curl http://127.0.0.1:$GATEWAY_PORT/api/orders   (no assertion: enforce route)"
curl -s "http://127.0.0.1:$GATEWAY_PORT/api/orders"
echo
echo "\$ curl -H 'X-AssertGate-Trust: verified' http://127.0.0.1:$GATEWAY_PORT/api/monitor/x   (spoofed header, monitor route)"
curl -s -H 'X-AssertGate-Trust: verified' "http://127.0.0.1:$GATEWAY_PORT/api/monitor/x" | grep -i 'x-assertgate' || true
echo
echo "\$ curl http://127.0.0.1:$ADMIN_PORT/metrics | grep assertgate_requests_total"
curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | grep '^assertgate_requests_total' || true

cat <<EOF

AssertGate is running (logs in $RUN/):
  gateway   http://127.0.0.1:$GATEWAY_PORT   (h2c prior knowledge and HTTP/1.1)
  admin     http://127.0.0.1:$ADMIN_PORT     (token: $ADMIN_TOKEN)
  upstream  http://127.0.0.1:$UPSTREAM_PORT   Redis 127.0.0.1:$REDIS_PORT
Try:
  $DEVICE request GET /api/profile $OPTS
  $DEVICE load --path /api/profile --connections 4 --streams 8 --duration 5 $OPTS
  curl -H 'Authorization: Bearer $ADMIN_TOKEN' http://127.0.0.1:$ADMIN_PORT/keys/<keyId>
Stop everything with: deploy/quickstart.sh stop
EOF
