# Sourced by the benchmarks that start their own processes (bench-env.sh
# too, for enforcement.sh and the like): WORK (a fresh
# directory; set WORK_NAME first), BIN (the release build), free_port, the
# pids array and its cleanup on exit, and passthrough_yaml.
WORK="$(mktemp -d "/tmp/assertgate-${WORK_NAME:-bench}.XXXXXX")"
BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# passthrough_yaml LISTENER ADMIN_PORT UPSTREAM_URL [TOP_LEVEL]: a gateway
# with one listener (LISTENER: its flow mapping's inside), a memory store and
# one passthrough route for every path; TOP_LEVEL adds lines (limits: ...).
passthrough_yaml() {
    cat <<YAML
listeners: [{$1}]
admin: {address: 127.0.0.1:$2}
apps: [{appId: ABCDE12345.com.example.app}]
store: {memory: {}}
upstreams: {api: {endpoints: [$3]}}
routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]
logging: {level: warning, format: text}
${4:-}
YAML
}
