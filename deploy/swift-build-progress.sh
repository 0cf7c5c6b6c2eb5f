#!/usr/bin/env bash
# Runs `swift build ARGS...` without flooding the terminal and without going
# silent: SwiftPM's "[n/m] ..." step lines are shown at most every
# PROGRESS_EVERY seconds (default 20), each with the time so far and a rough
# estimate of the time left; when no step finishes for a minute (a long
# compile or link) a "still building" line says so. Everything swift prints
# goes to LOG. When the build fails, every line the compiler wrote (all but
# the step lines) is printed, then the script exits with swift's status.
#
#   deploy/swift-build-progress.sh LOG [swift build arguments...]
#
# The estimate is rough: SwiftPM raises m as it plans more of the build, and
# the last steps (linking) are the slowest.
set -uo pipefail
log=${1:?usage: swift-build-progress.sh LOG [swift build arguments...]}
shift
every=${PROGRESS_EVERY:-20}
start=$SECONDS
status_file=$(mktemp)
trap 'rm -f "$status_file"' EXIT

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

echo "swift build $* (full output: $log)"
: >"$log"
{
    swift build "$@" 2>&1
    echo $? >"$status_file"
} | {
    shown=-1000 n=0 m=0 step=""
    while true; do
        if IFS= read -r -t 60 line; then
            printf '%s\n' "$line" >>"$log"
            if [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]]; then
                n=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]} step=${BASH_REMATCH[3]}
                elapsed=$((SECONDS - start))
                if ((m > 0 && elapsed - shown >= every)); then
                    shown=$elapsed
                    left=""
                    if ((n >= 20 && elapsed >= 20)); then
                        left=", roughly $(mmss $((elapsed * (m - n) / n))) left"
                    fi
                    printf '  [%d/%d] %d%%  %s so far%s\n' "$n" "$m" $((100 * n / m)) "$(mmss "$elapsed")" "$left"
                fi
            elif [[ $line == Build\ complete* || $line == Build\ of\ product* || $line == Compiling\ plugin* ]]; then
                printf '  %s\n' "$line"
            fi
        elif (($? > 128)); then
            # read timed out: nothing finished for a minute.
            printf '  still building: step %d of %d (%s), %s so far\n' "$n" "$m" "${step:-starting}" "$(mmss $((SECONDS - start)))"
        else
            break
        fi
    done
}
status=$(cat "$status_file" 2>/dev/null)
status=${status:-1}
if [ "$status" -ne 0 ]; then
    echo
    echo "swift build $* FAILED (exit $status) after $(mmss $((SECONDS - start))). The compiler's output:"
    echo "------------------------------------------------------------------------"
    grep -vE '^\[[0-9]+/[0-9]+\] ' "$log"
    echo "------------------------------------------------------------------------"
    echo "(the same, with the step lines, is in $log)"
    exit "$status"
fi
warnings=$(grep -c ': warning: ' "$log")
[ "$warnings" -eq 0 ] || echo "  $warnings compiler warning line(s); see: grep ': warning: ' $log"
echo "  built in $(mmss $((SECONDS - start)))"
