#!/usr/bin/env python3
"""Per-request figures from callgrind dumps (callgrind_control -d).

    callgrind_counts.py REQUESTS DUMP [DUMP...] [--top N]

Prints instructions (Ir) per request, calls per request to the allocator
(malloc, calloc, realloc, posix_memalign, aligned_alloc, free), to Swift's
reference counting (swift_retain, swift_release, and their _n forms) and to
swift_allocObject, and the top N functions by exclusive Ir per request.
Several dumps (nghttpx's master and worker processes) are added up.
"""
import collections, re, sys

ALLOC = ("malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "free")
SWIFT = ("swift_allocObject", "swift_retain", "swift_release", "swift_retain_n", "swift_release_n",
         "swift_bridgeObjectRetain", "swift_bridgeObjectRelease", "swift_beginAccess")

def parse(path, calls, self_ir):
    names = {}
    total = 0
    fn = None
    pending_call = None
    positions = "line"
    def name_of(spec):
        m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), m.group(1))
    cfn = None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("positions:"):
            positions = line.split(":", 1)[1].split()
        elif line.startswith("fn="):
            fn = name_of(line[3:]); cfn = None
        elif line.startswith("cfn="):
            cfn = name_of(line[4:])
        elif line.startswith("calls="):
            pending_call = int(line[6:].split()[0])
        elif line.startswith("summary:") or line.startswith("totals:"):
            total = max(total, int(line.split()[1]))
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            parts = line.split()
            npos = len(positions) if isinstance(positions, list) else 1
            ir = int(parts[npos]) if len(parts) > npos else 0
            if pending_call is not None:
                calls[cfn] += pending_call  # the cost line after calls= is inclusive: not self cost
                pending_call = None
            else:
                self_ir[fn] += ir
        elif line.startswith(("fl=", "fi=", "fe=", "ob=", "cob=", "cfi=", "cfl=")):
            spec = line.split("=", 1)[1]
            m = re.match(r"\((\d+)\)(?: (.*))?$", spec)  # file/object ids share no table with fn ids; ignore
    return total

def main():
    args = sys.argv[1:]
    top = 25
    if "--top" in args:
        i = args.index("--top"); top = int(args[i + 1]); del args[i:i + 2]
    n = int(args[0])
    calls, self_ir = collections.Counter(), collections.Counter()
    total = sum(parse(p, calls, self_ir) for p in args[1:])
    print(f"requests\t{n}")
    print(f"Ir/request\t{total / n:.0f}")
    allocs = sum(calls[a] for a in ALLOC if a != "free")
    print(f"allocations/request\t{allocs / n:.2f}\t(" + ", ".join(f"{a} {calls[a] / n:.2f}" for a in ALLOC if calls[a]) + ")")
    for s in SWIFT:
        if calls[s]:
            print(f"{s}/request\t{calls[s] / n:.2f}")
    print(f"top {top} functions by exclusive Ir per request:")
    for f, ir in self_ir.most_common(top):
        print(f"  {ir / n:9.0f}  {f[:150]}")

main()
