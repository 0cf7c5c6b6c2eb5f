#!/usr/bin/env python3
"""Per-request figures from callgrind dumps (callgrind_control -d).

    callgrind_counts.py REQUESTS DUMP [DUMP...] [--top N]

Prints instructions (Ir) per request, calls per request to the allocator
(malloc, calloc, realloc, posix_memalign, aligned_alloc, free), to Swift's
reference counting (swift_retain, swift_release, and their _n forms) and to
swift_allocObject, and the top N functions by exclusive Ir per request.
Several dumps (nghttpx's master and worker processes) are added up.
"""
import collections, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind_format

ALLOC = ("malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "free")
SWIFT = ("swift_allocObject", "swift_retain", "swift_release", "swift_retain_n", "swift_release_n",
         "swift_bridgeObjectRetain", "swift_bridgeObjectRelease", "swift_beginAccess")

def main():
    args = sys.argv[1:]
    top = 25
    if "--top" in args:
        i = args.index("--top"); top = int(args[i + 1]); del args[i:i + 2]
    n = int(args[0])
    dump = callgrind_format.Dump()
    for p in args[1:]:
        callgrind_format.read(p, into=dump)
    total, self_ir = dump.total, dump.self_ir
    calls = collections.Counter()
    for (_, callee), count in dump.calls.items():
        calls[callee] += count
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
