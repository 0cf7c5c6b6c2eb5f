#!/usr/bin/env python3
"""Where a proxy's instructions per request go, by component, from callgrind dumps.

    callgrind_split.py REQUESTS DUMP [DUMP...] [--detail COMPONENT]

Each function is put in a component: a Swift function by the module its
mangled name names (the gateway's own modules, SwiftNIO's, the standard
library's generic code specialised into the binary), anything else by the
object it is in (libnghttp2, libev, nghttpx itself, libc, the Swift runtime).
Support code that does no work of its own for a request (the Swift runtime:
reference counting, exclusivity checks, allocation; the standard library's
generics; malloc/free and mem* in libc; ld.so's thread-local lookups) is
charged to whoever called it: its own instructions are passed up the call
graph to its callers, in proportion to the inclusive cost of each call edge,
until they reach a function that is not support code. Each component is
printed as its own instructions plus the support instructions charged to it
("via runtime"), per request. An approximation (callgrind keeps a graph, not
the call tree) that sums to the dump's total. `--detail "gateway code"`
lists the support functions whose instructions that component was charged.

Used by BENCHMARKS.md §4h on the raw directories of Benchmarks/per-request.sh.
"""
import collections, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind_format

OWN = {"AssertGateCore", "AssertGateRedis", "GatewayTLS", "Verifier", "AssertGate", "CLISupport"}
NIO = re.compile(r"^_?NIO")
SUPPORT_OBJECTS = ("libswiftCore", "libswift_Concurrency", "libswiftDispatch", "libFoundation", "ld-linux", "libstdc++")
LIBC_SUPPORT = re.compile(
    r"(malloc|free|_int_|unlink_chunk|tcache|calloc|realloc|memalign|mem(cpy|move|set|cmp|chr)|str(len|cmp|chr)|"
    r"__tls_get_addr|pthread_(get|set)specific|arena)")


def swift_module(name):
    m = re.match(r"\$s(\d+)", name)
    if m:
        n = int(m.group(1))
        return name[len(m.group(0)):len(m.group(0)) + n]
    if name.startswith("$ss"):
        return "Swift"
    return None


def component(name, obj):
    base = obj.rsplit("/", 1)[-1]
    mod = swift_module(name)
    if mod is not None:
        if mod in OWN:
            return "gateway code", False
        if NIO.match(mod):
            return "SwiftNIO", False
        if mod == "Swift":
            return "Swift stdlib (specialised)", True
        return mod, False
    if name.startswith("$s"):
        return "Swift stdlib (specialised)", True
    if any(base.startswith(s) for s in SUPPORT_OBJECTS):
        return "Swift runtime", True
    if base.startswith("libc.so"):
        return "libc", bool(LIBC_SUPPORT.search(name))
    if base.startswith("libjemalloc"):
        return "jemalloc", True
    if base.startswith("libnghttp2"):
        return "nghttp2", False
    if base.startswith("libev"):
        return "libev", False
    return base or "?", False


def main():
    args = sys.argv[1:]
    detail = None
    if "--detail" in args:
        i = args.index("--detail")
        detail = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    requests = float(args[0])
    dump = callgrind_format.Dump()
    for p in args[1:]:
        callgrind_format.read(p, into=dump)
    total, self_ir, fn_obj, edges = dump.total, dump.self_ir, dump.fn_obj, dump.edges
    kind = {f: component(f, fn_obj.get(f, "")) for f in (set(self_ir) | set(fn_obj)) - {None}}
    callers = collections.defaultdict(list)
    for (a, b), ir in edges.items():
        if a != b:
            callers[b].append((a, ir))
    # Support code's own instructions flow up to its callers until they reach real work.
    mine = collections.Counter()  # component -> own Ir
    via = collections.Counter()  # component -> support Ir charged to it
    via_by = collections.defaultdict(collections.Counter)  # component -> support function -> Ir
    carry = collections.Counter()  # (function now, support function it came from) -> Ir
    for f, ir in self_ir.items():
        comp, support = kind[f]
        if support:
            carry[(f, f)] += ir
        else:
            mine[comp] += ir
    for _ in range(50):
        if not carry:
            break
        nxt = collections.Counter()
        for (f, origin), ir in carry.items():
            ups = callers.get(f, [])
            weight = sum(w for _, w in ups)
            if weight == 0:
                via[kind[f][0] + " (no caller)"] += ir
                continue
            for a, w in ups:
                share = ir * w / weight
                comp, support = kind.get(a, ("?", False))
                if support:
                    nxt[(a, origin)] += share
                else:
                    via[comp] += share
                    via_by[comp][origin] += share
        carry = nxt
    for (f, _), ir in carry.items():
        via[kind[f][0] + " (cycle)"] += ir
    comps = set(mine) | set(via)
    rows = sorted(comps, key=lambda c: -(mine[c] + via[c]))
    print(f"total Ir/request {total / requests:,.0f}")
    print(f"{'component':<32} {'own':>8} {'via runtime':>12} {'sum':>8}")
    for c in rows:
        s = (mine[c] + via[c]) / requests
        if s < 20:
            continue
        print(f"{c:<32} {mine[c] / requests:>8,.0f} {via[c] / requests:>12,.0f} {s:>8,.0f}")
    if detail:
        print(f"support code charged to {detail}:")
        for f, ir in via_by[detail].most_common(25):
            print(f"{ir / requests:>8,.0f}  {f[:110]}")


if __name__ == "__main__":
    main()
