#!/usr/bin/env bash
# How much time the vCPUs lose to something outside the running process:
# one spin loop per CPU reads CLOCK_MONOTONIC as fast as it can and counts
# the gaps between two reads longer than a threshold. On an idle machine
# such a gap is time the CPU was taken away (the host descheduled the vCPU,
# or a kernel thread or interrupt ran).
#
#   Benchmarks/vcpu-gaps.sh [seconds=10] [threshold_ms=0.2] [cpus="0 1"]
#
# Needs a C compiler (cc). Prints one line per CPU.
set -euo pipefail
SECS="${1:-10}"; THR="${2:-0.2}"; CPUS="${3:-0 1}"
DIR="$(mktemp -d /tmp/vcpu-gaps.XXXXXX)"
trap 'rm -rf "$DIR"' EXIT
cat >"$DIR/gap.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    double duration = atof(argv[1]), threshold = atof(argv[2]) * 1e-3;
    double start = now(), last = start, lost = 0, longest = 0;
    long gaps = 0, over1ms = 0;
    for (;;) {
        double t = now(), gap = t - last;
        if (gap > threshold) { gaps++; lost += gap; if (gap > longest) longest = gap; if (gap > 1e-3) over1ms++; }
        last = t;
        if (t - start > duration) break;
    }
    printf("gaps > %.2f ms: %ld (> 1 ms: %ld), lost %.1f ms, longest %.2f ms\n", threshold * 1e3, gaps, over1ms, lost * 1e3, longest * 1e3);
    return 0;
}
C
cc -O2 -o "$DIR/gap" "$DIR/gap.c"
for c in $CPUS; do taskset -c "$c" "$DIR/gap" "$SECS" "$THR" | sed "s/^/cpu$c: /" & done
wait
