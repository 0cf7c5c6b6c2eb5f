# Sourced by per-request.sh, same-rate.sh and side-by-side.sh: starting and
# stopping the processes they measure, by PID and session only (never by
# name: other engineers' nginx or redis may share the machine).
# Sets `live` (the sessions to stop on exit) and the EXIT trap.

# bench_setup NAME TARGET...: BIN (the release build the `assertgate` target
# runs, which must exist), a check of OLD_ASSERTGATE for `assertgate-old`, and
# WORK (this run's directory, kept for the raw results).
bench_setup() {
    local name=$1; shift
    export PATH="$PATH:/usr/sbin"
    BIN="$(cd "$ROOT" && swift build -c release --show-bin-path 2>/dev/null || echo "$ROOT/.build/release")"
    if [[ " $* " == *" assertgate "* ]] && [ ! -x "$BIN/assertgate" ]; then
        echo "no release gateway at $BIN/assertgate: build it first with  swift build -c release --product assertgate" >&2
        exit 2
    fi
    if [[ " $* " == *" assertgate-old "* ]] && [ ! -x "${OLD_ASSERTGATE:-}" ]; then
        echo "assertgate-old: set OLD_ASSERTGATE to another build's assertgate binary" >&2
        exit 2
    fi
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/assertgate-$name.XXXXXX")"
    echo "work directory: $WORK" >&2
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

live=()
# spawn LOG CMD...: CMD in a new session (setsid execs in place: $! is CMD's PID).
spawn() { local log=$1; shift; setsid "$@" </dev/null >"$log" 2>&1 & SPAWNED=$!; live+=("$SPAWNED"); }

# proc_table: "PID SID TICKS" for every process (TICKS: utime + stime).
proc_table() {
    python3 - <<'PY'
import os
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        print(d, fields[3], int(fields[11]) + int(fields[12]))
PY
}

session_members() { proc_table | awk -v sid="$1" '$2 == sid { print $1 }'; } # SID: the PIDs whose session is SID

session_ticks() { # SID...: utime+stime of every process in each session, one sum per SID
    proc_table | awk -v list="$*" '
        BEGIN { n = split(list, sids, " "); for (i = 1; i <= n; i++) sum[sids[i]] = 0 }
        ($2 in sum) { sum[$2] += $3 }
        END { for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), sum[sids[i]]; print "" }'
}

stop() { # PID: TERM to its whole session, up to 5 s, then KILL what is left
    local pid=$1 p q keep=()
    for p in $(session_members "$pid"); do kill -TERM "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do [ -z "$(session_members "$pid")" ] && break; sleep 0.1; done
    for p in $(session_members "$pid"); do kill -KILL "$p" 2>/dev/null || true; done
    wait "$pid" 2>/dev/null || true
    for q in "${live[@]}"; do [ "$q" = "$pid" ] || keep+=("$q"); done
    live=("${keep[@]}")
}
cleanup() { local i; for ((i = ${#live[@]} - 1; i >= 0; i--)); do stop "${live[i]}"; done; }
trap cleanup EXIT

wait_listening() { # PORT: up to 60 s for something to accept on 127.0.0.1:PORT
    for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1
}
