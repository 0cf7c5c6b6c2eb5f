#!/usr/bin/env python3
"""Windows in which no vCPU switched tasks, from `perf sched timehist -w`.

    perf sched record -o sched.data -- sleep 6      # during a load run
    perf sched timehist -i sched.data -w > timehist.txt
    Benchmarks/vm-silences.py timehist.txt [threshold_ms=1]

Under load the vCPUs switch tasks every few tens of µs, so a long window with
no event on any of them, in which the task on each vCPU is charged the whole
window as run time, is time the whole VM did not run. Prints each window with
the task each vCPU was charged for it.
"""
import re
import sys

path = sys.argv[1]
threshold = float(sys.argv[2] if len(sys.argv) > 2 else 1) / 1000
events = []
for line in open(path):
    fields = line.split()
    if fields and re.match(r"^\d+\.\d+$", fields[0]):
        events.append((float(fields[0]), fields[1], fields[2], line, fields))
events.sort(key=lambda e: e[0])
windows = []
for i, (a, b) in enumerate(zip(events, events[1:])):
    if b[0] - a[0] <= threshold:
        continue
    charged = {}
    for _, cpu, task, line, fields in events[i + 1:i + 40]:
        if cpu in charged or "awakened" in line:
            continue
        try:
            charged[cpu] = f"{task.split('[')[0]} {float(fields[-1]):.2f} ms"
        except ValueError:
            continue
    windows.append((b[0] - a[0], a[0], charged))
span = events[-1][0] - events[0][0] if events else 0
print(f"{span:.1f} s traced; {len(windows)} windows over {threshold * 1000:g} ms with no event on any vCPU, "
      f"{sum(w[0] for w in windows) * 1000:.1f} ms in all")
for length, start, charged in sorted(windows, reverse=True):
    print(f"{length * 1000:6.2f} ms at {start:.6f}: " + ", ".join(f"{c} {t}" for c, t in sorted(charged.items())))
