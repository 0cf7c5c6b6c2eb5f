#!/usr/bin/env bash
# AssertGate quickstart: on a fresh Debian 12 machine, installs what is
# missing, builds the gateway and the device simulator, starts Redis on
# loopback, a demo upstream that echoes the headers it receives, a mock of
# Apple's DeviceCheck servers (over TLS, with a throw-away CA) and the
# gateway, then plays an app through attest -> asserted request -> replay and
# shows the trust headers and the rejection, the risk rules, and a promotion
# each device gets once (DeviceCheck's bit 0, read and set through the
# gateway). Everything listens on 127.0.0.1.
#
#   deploy/quickstart.sh          set up, run, demo; leaves the four services running
#   deploy/quickstart.sh stop     stops them (by the PIDs it recorded, each with
#                                 its start time: a stale file never stops
#                                 another program that got the PID)
# Ctrl-C during a run stops what that run had started.
#
# Ports (override in the environment): GATEWAY_PORT=8080 ADMIN_PORT=9901
# UPSTREAM_PORT=9001 REDIS_PORT=6390 APPLE_MOCK_PORT=9443. State, logs and
# configs: deploy/run/ (QUICKSTART_RUN=DIR puts them elsewhere).
# QUICKSTART_BIN=DIR skips the package check and the build and uses the
# assertgate and assertgate-device binaries in DIR (the tests use it).
# READY_SECONDS=60: how long each service may take to answer.
#
# Time on a 2-core machine: about 6 minutes the first time (the release build),
# about 15 seconds once built.
#
# The demo device is a software device (DeviceSim) with its own test CA: the
# gateway is configured to trust that CA instead of Apple's roots. Never do
# that in production (see deploy/production.yaml).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN="${QUICKSTART_RUN:-$ROOT/deploy/run}"
GATEWAY_PORT="${GATEWAY_PORT:-8080}"
ADMIN_PORT="${ADMIN_PORT:-9901}"
UPSTREAM_PORT="${UPSTREAM_PORT:-9001}"
REDIS_PORT="${REDIS_PORT:-6390}"
APPLE_MOCK_PORT="${APPLE_MOCK_PORT:-9443}"
READY_SECONDS="${READY_SECONDS:-60}"
ADMIN_TOKEN="quickstart-admin-token"
APP_ID="ABCDE12345.com.example.app"
# The gateway's DeviceCheck key id (10 x A-Z 0-9, like Apple's) and the device
# the promotion demo plays.
DC_KEY_ID="QUICKSTART"
DC_DEVICE="alices-iphone"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# proc_start PID: when the process started (clock ticks since boot, field 22
# of /proc/PID/stat). With the PID it names one process for good: a pid file
# left by a crash or from before a reboot, whose PID now belongs to another
# program, is never acted on.
proc_start() {
    local stat fields
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    # Fields after the command name, which may hold spaces: state is field 3.
    read -r -a fields <<<"${stat##*) }"
    echo "${fields[19]}"
}

# legacy_match NAME PID: PID's command line is that of service NAME.
legacy_match() {
    local cmdline
    cmdline="$(tr '\0' ' ' <"/proc/$2/cmdline" 2>/dev/null)" || return 1
    case "$1" in
    gateway) [[ "$cmdline" == *"assertgate serve"* ]] ;;
    apple-mock) [[ "$cmdline" == *"assertgate-device apple-mock"* ]] ;;
    upstream) [[ "$cmdline" == *demo-upstream.py* ]] ;;
    redis) [[ "$cmdline" == *redis-server* ]] ;;
    *) return 1 ;;
    esac
}

# Stops the services this script recorded in $RUN/*.pid (newest first), each
# by its PID, if it is still the process that was started: TERM, then KILL
# after 5 s.
stop_all() {
    for name in gateway apple-mock upstream redis; do
        pidfile="$RUN/$name.pid"
        [ -f "$pidfile" ] || continue
        pid="" start=""
        read -r pid start <"$pidfile" || true
        if [ -n "$pid" ] && [ -z "$start" ] && legacy_match "$name" "$pid"; then
            # A file from before start times were recorded: the PID alone, so
            # the program's command line has to say it is the service.
            start="$(proc_start "$pid" || true)"
        fi
        if [ -z "$pid" ] || [ -z "$start" ] || [ "$(proc_start "$pid" || true)" != "$start" ]; then
            echo "$name: not running (stale pid file removed)"
        elif kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            echo "stopped $name (pid $pid)"
        fi
        rm -f "$pidfile"
    done
}

if [ "${1:-}" = "stop" ]; then
    stop_all
    exit 0
fi

# Ctrl-C (or TERM) stops what this run started (set once the services of an
# earlier run are stopped, below). A step that fails unexpectedly leaves the
# services for a look at their logs, and says so.
on_signal() {
    trap - INT TERM
    echo >&2
    echo "interrupted: stopping what this run started" >&2
    stop_all >&2
    exit 130
}
on_exit() {
    local rc=$? running=()
    [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ] || return 0
    for name in gateway apple-mock upstream redis; do
        [ -f "$RUN/$name.pid" ] && running+=("$name")
    done
    [ "${#running[@]}" -gt 0 ] || return 0
    echo >&2
    echo "quickstart failed (exit $rc). Still running: ${running[*]} (logs in $RUN/)." >&2
    echo "Stop them with: deploy/quickstart.sh stop" >&2
}
trap on_exit EXIT

# start_service NAME "PORT_VARIABLES" LOG READY_COMMAND -- COMMAND...
# Starts COMMAND in its own session (output to LOG), records its PID in
# $RUN/NAME.pid, then waits up to READY_SECONDS for READY_COMMAND (a shell
# command) to succeed. If the service exits or never gets ready, prints the
# end of its log, the addresses it was to listen on with the variables that
# move them, stops everything started so far and exits 1.
start_service() {
    local name=$1 vars=$2 log=$3 ready=$4 var why="" pid=""
    shift 5
    # A port something already answers on would pass the readiness check
    # with the wrong program behind it: refuse before starting.
    for var in $vars; do
        if (exec 3<>"/dev/tcp/127.0.0.1/${!var}") 2>/dev/null; then
            why="not started: another program already listens on 127.0.0.1:${!var} ($var)"
        fi
    done
    if [ -z "$why" ]; then
        setsid "$@" </dev/null >>"$log" 2>&1 &
        pid=$!
        # An empty start time (it has exited already) is caught below.
        echo "$pid $(proc_start "$pid" || true)" >"$RUN/$name.pid"
        echo "started $name (pid $pid), log $log"
    fi
    local deadline=$((SECONDS + READY_SECONDS))
    while [ -z "$why" ]; do
        if bash -c "$ready" >/dev/null 2>&1 && kill -0 "$pid" 2>/dev/null; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then
            why="exited before it was ready"
            break
        fi
        if ((SECONDS >= deadline)); then
            why="was not ready after $READY_SECONDS s (READY_SECONDS=$READY_SECONDS to wait longer)"
            break
        fi
        sleep 0.2
    done
    local addresses=() moves=()
    for var in $vars; do
        addresses+=("127.0.0.1:${!var} ($var)")
        moves+=("$var=<free port>")
    done
    {
        echo
        echo "FAILED: $name $why."
        if [ -n "$pid" ]; then
            echo "The end of its log ($log):"
            tail -n 15 "$log" | sed 's/^/    /'
        fi
        local joined
        joined=$(printf '%s and ' "${addresses[@]}")
        echo "It listens on ${joined% and }. If another program holds one of these ports"
        echo "(ss -ltnp shows which), stop that program or move this one, e.g.:"
        echo "    ${moves[*]} deploy/quickstart.sh"
        echo "Stopping what this run started:"
    } >&2
    stop_all >&2
    exit 1
}

if [ -n "${QUICKSTART_BIN:-}" ]; then
    say "1/7 system packages and 2/7 build: skipped (QUICKSTART_BIN=$QUICKSTART_BIN)"
    BIN="$QUICKSTART_BIN"
else
    # Checked first: nothing is installed for a run that cannot build.
    if ! command -v swift >/dev/null 2>&1; then
        cat >&2 <<'EOF'
Swift 6.1 or later is not installed (no `swift` on PATH). Debian 12 has no Swift package:
install the toolchain from https://www.swift.org/install/linux/ (or use the
swiftlang/swift Debian 12 image), put its usr/bin on PATH, check with
`swift --version`, and run this script again.
EOF
        exit 1
    fi
    # Package.swift says swift-tools-version 6.1: an older toolchain refuses it
    # with a message about the manifest, not about the version to install.
    swift_version=$(swift --version 2>&1 | sed -n 's/.*Swift version \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p' | head -n 1)
    if [ -n "$swift_version" ]; then
        read -r swift_major swift_minor <<<"$swift_version"
        if [ "$swift_major" -lt 6 ] || { [ "$swift_major" -eq 6 ] && [ "$swift_minor" -lt 1 ]; }; then
            echo "Swift $swift_major.$swift_minor is too old: AssertGate needs Swift 6.1 or later (https://www.swift.org/install/linux/)." >&2
            exit 1
        fi
    fi
    say "1/7 system packages"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    need=()
    for pkg in libssl-dev libnghttp2-dev libhiredis-dev redis-server curl python3 pkg-config openssl; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
    if [ "${#need[@]}" -gt 0 ]; then
        echo "installing: ${need[*]}"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
    else
        echo "all present"
    fi

    say "2/7 build (release; about 5-6 minutes the first time on 2 cores, seconds afterwards)"
    cd "$ROOT"
    mkdir -p "$RUN"
    "$ROOT/deploy/swift-build-progress.sh" "$RUN/build-assertgate.log" -c release --product assertgate
    "$ROOT/deploy/swift-build-progress.sh" "$RUN/build-assertgate-device.log" -c release --product assertgate-device
    BIN="$(swift build -c release --show-bin-path)"
fi
GW="$BIN/assertgate"
DEVICE="$BIN/assertgate-device"
for exe in "$GW" "$DEVICE"; do
    [ -x "$exe" ] || { echo "not found: $exe" >&2; exit 1; }
done
command -v openssl >/dev/null 2>&1 || { echo "openssl is not installed (apt-get install openssl)" >&2; exit 1; }

mkdir -p "$RUN"
stop_all
trap on_signal INT TERM
rm -rf "$RUN/device" "$RUN/apple"
rm -f "$RUN/redis.log" "$RUN/upstream.log" "$RUN/apple-mock.log" "$RUN/gateway.log"

say "3/7 Redis on 127.0.0.1:$REDIS_PORT and the demo upstream on 127.0.0.1:$UPSTREAM_PORT"
start_service redis REDIS_PORT "$RUN/redis.log" "redis-cli -p $REDIS_PORT ping | grep -q PONG" -- \
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no
start_service upstream UPSTREAM_PORT "$RUN/upstream.log" "curl -sf http://127.0.0.1:$UPSTREAM_PORT/" -- \
    python3 "$ROOT/deploy/demo-upstream.py" "$UPSTREAM_PORT"

say "4/7 the Apple mock (DeviceCheck) on https://127.0.0.1:$APPLE_MOCK_PORT"
# A throw-away CA and a certificate for 127.0.0.1 signed by it (the gateway
# trusts this CA as deviceCheck.caFile), and the gateway's DeviceCheck key
# (EC P-256, as Apple's .p8), whose public half the mock checks each JWT with.
# Private keys stay in $RUN/apple (mode 0700) and are never printed.
APPLE="$RUN/apple"
# Paths as they go into the YAML (double-quoted) and into commands shown to
# the user (shell-quoted): a checkout under a directory with spaces works.
yaml_path() { local p=${1//\\/\\\\}; printf '"%s"' "${p//\"/\\\"}"; }
Q_APPLE_CA="$(printf %q "$APPLE/ca.crt")"
make_apple_pki() {
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2)
    (umask 077 && mkdir -p "$APPLE") &&
        openssl req -x509 "${ec[@]}" -keyout "$APPLE/ca.key" -out "$APPLE/ca.crt" \
            -subj "/CN=AssertGate quickstart Apple mock CA" &&
        openssl req -x509 -CA "$APPLE/ca.crt" -CAkey "$APPLE/ca.key" "${ec[@]}" \
            -keyout "$APPLE/server.key" -out "$APPLE/server.crt" \
            -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1,DNS:localhost &&
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$APPLE/AuthKey_$DC_KEY_ID.p8" &&
        openssl pkey -in "$APPLE/AuthKey_$DC_KEY_ID.p8" -pubout -out "$APPLE/AuthKey_$DC_KEY_ID.pub.pem"
}
if ! make_apple_pki >"$RUN/apple-pki.log" 2>&1; then
    {
        echo
        echo "FAILED: openssl could not make the Apple mock's CA, certificate and key:"
        tail -n 15 "$RUN/apple-pki.log" | sed 's/^/    /'
        echo "Stopping what this run started:"
    } >&2
    stop_all >&2
    exit 1
fi
echo "CA $APPLE/ca.crt, server certificate for 127.0.0.1, DeviceCheck key $DC_KEY_ID (public half for the mock)"
start_service apple-mock APPLE_MOCK_PORT "$RUN/apple-mock.log" \
    "curl -sf --cacert $Q_APPLE_CA https://127.0.0.1:$APPLE_MOCK_PORT/mock/requests" -- \
    "$DEVICE" apple-mock --port "$APPLE_MOCK_PORT" --cert "$APPLE/server.crt" --key "$APPLE/server.key" \
    --jwt-public-key "$APPLE/AuthKey_$DC_KEY_ID.pub.pem"

say "5/7 test CA for the simulated device, gateway config"
"$DEVICE" init-ca --state "$RUN/device"
CONFIG="$RUN/quickstart.yaml"
cat >"$CONFIG" <<EOF
# Written by deploy/quickstart.sh. See deploy/production.yaml for a real setup.
listeners: [{address: 127.0.0.1:$GATEWAY_PORT}]
admin: {address: 127.0.0.1:$ADMIN_PORT, token: $ADMIN_TOKEN}
# Risk rules (README "Risk rules"): builds older than 2.0 are flagged to the upstream...
apps: [{appId: $APP_ID, environments: [development], rules: {flag: {minAppVersion: "2.0"}}}]
attestation:
  # The simulated device's test CA replaces Apple's roots (demo only!).
  trustAnchors: [$(yaml_path "$RUN/device/ca/root.cert.pem")]
  receiptTrustAnchors: [$(yaml_path "$RUN/device/ca/receipt-root.cert.pem")]
store: {redis: {url: "redis://127.0.0.1:$REDIS_PORT/0"}}
# DeviceCheck asks the Apple mock; its certificate's CA is trusted instead of
# the system's (demo only: in production leave baseURL, developmentBaseURL and
# caFile out, and give Apple's team id, key id and .p8 key).
deviceCheck:
  teamId: ABCDE12345
  keyId: $DC_KEY_ID
  privateKey: {file: $(yaml_path "$APPLE/AuthKey_$DC_KEY_ID.p8")}
  baseURL: https://127.0.0.1:$APPLE_MOCK_PORT
  developmentBaseURL: https://127.0.0.1:$APPLE_MOCK_PORT
  environment: development
  caFile: $(yaml_path "$APPLE/ca.crt")
trust: {signingSecret: quickstart-signing-secret}
upstreams: {api: {endpoints: [http://127.0.0.1:$UPSTREAM_PORT]}}
routes:
  # ...and payments take App Store builds only.
  - {match: {prefix: /api/payments/}, upstream: api, mode: enforce, rules: {require: {launchCategories: [app-store]}}}
  - {match: {prefix: /api/monitor/}, upstream: api, mode: monitor}
  # A promotion each device gets once: the gateway asks DeviceCheck for the
  # device's two bits and passes them on; the upstream sets bit0 when it grants
  # the offer. Devices whose bit1 (fraud) is set are refused, and that rule
  # needs a fresh device token on every request.
  - {match: {prefix: /api/promo/}, upstream: api, mode: enforce, deviceCheck: query, rules: {require: {deviceBits: {bit1: false}}}}
  - {match: {prefix: /api/}, upstream: api, mode: enforce}
  - {match: {prefix: /}, upstream: api, mode: passthrough}
logging: {level: info, format: text}
EOF
"$GW" check-config "$CONFIG" | tail -n 1

say "6/7 the gateway on 127.0.0.1:$GATEWAY_PORT (admin 127.0.0.1:$ADMIN_PORT)"
# Ready when /readyz answers: both listeners open and Redis reachable.
start_service gateway "GATEWAY_PORT ADMIN_PORT" "$RUN/gateway.log" "curl -sf http://127.0.0.1:$ADMIN_PORT/readyz" -- \
    "$GW" serve --config "$CONFIG"

say "7/7 demo: attest, asserted requests, replay, risk rules, a once-per-device promotion (DeviceCheck)"
OPTS="--gateway http://127.0.0.1:$GATEWAY_PORT --state $(printf %q "$RUN/device")"
echo "\$ assertgate-device attest --user-id alice --launch-category testflight --bundle-version 1.4   (an iOS 27 TestFlight build 1.4)"
"$DEVICE" attest --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device" --user-id alice \
    --launch-category testflight --bundle-version 1.4
KEY_ID="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["keyId"].replace("+", "-").replace("/", "_").rstrip("="))' "$RUN/device/state.json")"
echo
echo "\$ assertgate-device request POST /api/orders --body '{\"item\":42}'   (the upstream echoes what it received)"
FIRST="$("$DEVICE" request POST /api/orders --body '{"item":42}' --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device")"
echo "$FIRST"
echo
echo "\$ assertgate-device request POST /api/orders --body '{\"item\":42}' --replay   (same assertion again)"
REPLAY="$("$DEVICE" request POST /api/orders --body '{"item":42}' --replay \
    --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device" 2>&1 || true)"
echo "$REPLAY"
echo
echo "\$ assertgate-device request POST /api/payments/checkout --body '{\"item\":42}'   (require rule: App Store builds only)"
PAYMENT="$("$DEVICE" request POST /api/payments/checkout --body '{"item":42}' \
    --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device" 2>&1 || true)"
echo "$PAYMENT"
echo

# The promotion: the app sends a DeviceCheck token (from DCDevice.generateToken()
# on a real device; from the mock's own generator here) with its asserted request.
echo "\$ assertgate-device device-token --device $DC_DEVICE --count 2   (two DeviceCheck tokens of one device, as DCDevice.generateToken() gives them)"
TOKENS="$("$DEVICE" device-token --device "$DC_DEVICE" --count 2)"
TOKEN1="$(sed -n 1p <<<"$TOKENS")"
TOKEN2="$(sed -n 2p <<<"$TOKENS")"
echo "token 1: ${TOKEN1:0:20}... (${#TOKEN1} characters); token 2: ${TOKEN2:0:20}... (each token differs, the device is the same)"
# promo TOKEN: one asserted request to the promo route with that device token;
# prints the status, any response header that is not the usual ones, and the
# lines of the upstream's echo the demo is about.
promo() {
    "$DEVICE" request POST /api/promo/claim --body '{"offer":"free-month"}' --header "AssertGate-Device-Token: $1" \
        --gateway "http://127.0.0.1:$GATEWAY_PORT" --state "$RUN/device" 2>&1 || true
}
promo_lines() {
    grep -iE '^HTTP [0-9]+|^x-assertgate|"X-AssertGate-(Trust|Device|Device-Bits)"|"(offer|setDeviceBits|reason)"' <<<"$1" || true
}
echo
echo "\$ assertgate-device request POST /api/promo/claim --body '{\"offer\":\"free-month\"}' --header \"AssertGate-Device-Token: <token 1>\"   (the upstream's echo, trimmed)"
PROMO1="$(promo "$TOKEN1")"
promo_lines "$PROMO1"
echo
# Delivery to Apple is asynchronous (a queue in Redis and a worker): poll what
# Apple (the mock) holds for the device until bit0 is set, at most 10 s.
echo "\$ curl --cacert $Q_APPLE_CA https://127.0.0.1:$APPLE_MOCK_PORT/mock/bits?device=$DC_DEVICE   (what Apple holds; polled until bit0 is set, at most 10 s)"
DELIVERY_START=$(date +%s%N)
DELIVERY_DEADLINE=$((SECONDS + 10))
DELIVERED=""
while :; do
    APPLE_BITS="$(curl -s --cacert "$APPLE/ca.crt" "https://127.0.0.1:$APPLE_MOCK_PORT/mock/bits?device=$DC_DEVICE" || true)"
    if grep -q '"bit0":true' <<<"$APPLE_BITS"; then
        DELIVERY_END=$(date +%s%N)
        DELIVERED="$(((DELIVERY_END - DELIVERY_START) / 1000000)) ms"
        break
    fi
    ((SECONDS < DELIVERY_DEADLINE)) || break
    sleep 0.05
done
echo "${APPLE_BITS:-(no answer)}"
if [ -n "$DELIVERED" ]; then
    echo "(bit0 set at Apple $DELIVERED after the upstream's answer)"
else
    echo "(not delivered within 10 s: see $RUN/gateway.log and $RUN/apple-mock.log)"
fi
echo
echo "\$ assertgate-device request POST /api/promo/claim ... --header \"AssertGate-Device-Token: <token 2>\"   (same device, new token)"
PROMO2="$(promo "$TOKEN2")"
promo_lines "$PROMO2"
echo
echo "\$ assertgate-device request POST /api/promo/claim ... --header \"AssertGate-Device-Token: <token 1>\"   (token 1 again, with a fresh assertion)"
PROMO3="$(promo "$TOKEN1")"
promo_lines "$PROMO3"
echo
echo "\$ curl http://127.0.0.1:$GATEWAY_PORT/api/orders   (no assertion: enforce route)"
curl -s "http://127.0.0.1:$GATEWAY_PORT/api/orders"
echo
echo "\$ curl -H 'X-AssertGate-Trust: verified' http://127.0.0.1:$GATEWAY_PORT/api/monitor/x   (spoofed header, monitor route)"
SPOOFED="$(curl -s -H 'X-AssertGate-Trust: verified' "http://127.0.0.1:$GATEWAY_PORT/api/monitor/x" | grep -i 'x-assertgate' || true)"
echo "$SPOOFED"
echo
echo "\$ curl http://127.0.0.1:$ADMIN_PORT/metrics | grep -E 'assertgate_(requests|devicecheck_calls)_total'"
curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | grep -E '^assertgate_(requests|devicecheck_calls)_total' || true

# The summary reports what this run saw, not what it expected to see.
TRUST_SEEN="$(grep -o '"X-AssertGate-Trust": "[a-z]*"' <<<"$FIRST" | cut -d'"' -f4 || true)"
HEADERS_SEEN="$(grep -o '"X-AssertGate-[A-Za-z-]*"' <<<"$FIRST" | tr -d '"' | sed 's/^X-AssertGate-//' | grep -vx 'Trust' | paste -sd, - || true)"
REPLAY_STATUS="$(grep -m1 -o '^HTTP [0-9]*' <<<"$REPLAY" | cut -d' ' -f2 || true)"
REPLAY_REASON="$(grep -m1 -o '"reason":"[a-z-]*"' <<<"$REPLAY" | cut -d'"' -f4 || true)"
SPOOF_SEEN="$(grep -o '"X-AssertGate-Trust": "[a-z]*"' <<<"$SPOOFED" | cut -d'"' -f4 || true)"
FLAGS_SEEN="$(grep -o '"X-AssertGate-Flags": "[a-z, -]*"' <<<"$FIRST" | cut -d'"' -f4 || true)"
CATEGORY_SEEN="$(grep -o '"X-AssertGate-Launch-Category": "[a-z0-9-]*"' <<<"$FIRST" | cut -d'"' -f4 || true)"
PAYMENT_STATUS="$(grep -m1 -o '^HTTP [0-9]*' <<<"$PAYMENT" | cut -d' ' -f2 || true)"
PAYMENT_REASON="$(grep -m1 -o '"reason":"[a-z-]*"' <<<"$PAYMENT" | cut -d'"' -f4 || true)"
# echo_value JSON NAME: the value of "NAME": "..." in the upstream's echo.
echo_value() { grep -m1 -o "\"$2\": \"[^\"]*\"" <<<"$1" | cut -d'"' -f4 || true; }
DEVICE1_SEEN="$(echo_value "$PROMO1" X-AssertGate-Device)"
BITS1_SEEN="$(echo_value "$PROMO1" X-AssertGate-Device-Bits)"
OFFER1_SEEN="$(echo_value "$PROMO1" offer)"
SET1_SEEN="$(echo_value "$PROMO1" setDeviceBits)"
BITS2_SEEN="$(echo_value "$PROMO2" X-AssertGate-Device-Bits)"
OFFER2_SEEN="$(echo_value "$PROMO2" offer)"
# The app's side of the first promo answer: its headers, before the blank line.
if sed '/^$/q' <<<"$PROMO1" | grep -qi '^x-assertgate-set-device-bits'; then LEAKED="it did"; else LEAKED="it did not"; fi
REUSED_STATUS="$(grep -m1 -o '^HTTP [0-9]*' <<<"$PROMO3" | cut -d' ' -f2 || true)"
REUSED_REASON="$(grep -m1 -o '"reason":"[a-z-]*"' <<<"$PROMO3" | cut -d'"' -f4 || true)"
cat <<EOF

What the demo showed:
  trust headers   the asserted request reached the upstream with X-AssertGate-Trust: ${TRUST_SEEN:-?} and the facts the gateway checked (${HEADERS_SEEN:-none}), signed with trust.signingSecret: believe these, never a client's.
  replay refusal  sending the same signed request again was refused (HTTP ${REPLAY_STATUS:-?} ${REPLAY_REASON:-?}): every assertion must carry a higher counter, so a captured request cannot be replayed.
  spoofed header  the client's own X-AssertGate-Trust: verified was removed; the upstream saw the gateway's verdict instead (${SPOOF_SEEN:-?}: no assertion, let through on the monitor route).
  flag rule       the app's flag.minAppVersion "2.0" let the build 1.4 (launch category ${CATEGORY_SEEN:-?}) through, telling the upstream X-AssertGate-Flags: ${FLAGS_SEEN:-none}.
  require rule    the payments route's require.launchCategories [app-store] refused the TestFlight build (HTTP ${PAYMENT_STATUS:-?} ${PAYMENT_REASON:-?}).
  device bits     the promo route (deviceCheck: query) asked Apple (the mock) about the device token and told the upstream X-AssertGate-Device: ${DEVICE1_SEEN:-?}, X-AssertGate-Device-Bits: ${BITS1_SEEN:-?}; the upstream's offer: ${OFFER1_SEEN:-?}, and it answered X-AssertGate-Set-Device-Bits: ${SET1_SEEN:-none}.
  bit update      the gateway took that header off the answer (the app saw it? ${LEAKED}), queued the update in Redis and delivered it to Apple in the background (${DELIVERED:-not within 10 s}).
  bit set         the next request, with a new token of the same device, saw X-AssertGate-Device-Bits: ${BITS2_SEEN:-?}; the upstream's offer: ${OFFER2_SEEN:-?}.
  token reuse     token 1 sent again, with a fresh assertion, was refused (HTTP ${REUSED_STATUS:-?} ${REUSED_REASON:-?}): the gateway accepts a device token once. (This route refuses it because its bit1 rule needs the bits; a deviceCheck route without a deviceBits rule forwards it marked X-AssertGate-Device: reused.)

AssertGate is running (logs in $RUN/):
  gateway   http://127.0.0.1:$GATEWAY_PORT   (h2c prior knowledge and HTTP/1.1)
  admin     http://127.0.0.1:$ADMIN_PORT     (token: $ADMIN_TOKEN)
  metrics   http://127.0.0.1:$ADMIN_PORT/metrics
  config    $CONFIG
  upstream  http://127.0.0.1:$UPSTREAM_PORT   Redis 127.0.0.1:$REDIS_PORT
  apple     https://127.0.0.1:$APPLE_MOCK_PORT  (the Apple mock, DeviceCheck for the gateway; its CA: $APPLE/ca.crt)
Put the commands on your PATH:
  export PATH=$(printf %q "$BIN"):\$PATH
Try:
  assertgate-device request GET /api/profile $OPTS
  assertgate-device request POST /api/promo/claim --header "AssertGate-Device-Token: \$(assertgate-device device-token --device another-phone)" $OPTS
  curl --cacert $Q_APPLE_CA "https://127.0.0.1:$APPLE_MOCK_PORT/mock/bits?device=another-phone"
  assertgate-device load --path /api/profile --connections 4 --streams 8 --duration 5 $OPTS
  curl -H 'Authorization: Bearer $ADMIN_TOKEN' http://127.0.0.1:$ADMIN_PORT/keys/$KEY_ID
  assertgate check-config $(printf %q "$CONFIG")
Stop everything with: deploy/quickstart.sh stop
EOF
