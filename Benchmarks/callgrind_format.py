"""Reads a callgrind dump (callgrind_control -d) for the scripts beside it.

`read(path)` returns the dump's total Ir and three tables: each function's
own (exclusive) Ir, the object each function is in, and each call edge
(caller, callee) with its call count and inclusive Ir. Names and objects
are decompressed ("fn=(12) name" then "fn=(12)"); the cost line after a
`calls=` line is the call's inclusive cost, never the caller's own.
"""
import collections, re


def _lookup(table, spec):
    m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
    if not m:
        return spec
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1), m.group(1))


class Dump:
    def __init__(self):
        self.total = 0
        self.self_ir = collections.Counter()
        self.fn_obj = {}
        self.calls = collections.Counter()  # (caller, callee) -> calls
        self.edges = collections.Counter()  # (caller, callee) -> inclusive Ir


def read(path, into=None):
    d = into or Dump()
    fn_names, ob_names = {}, {}
    fn = cfn = None
    ob = cob = ""
    pending = None
    positions = 1
    total = 0
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("positions:"):
            positions = len(line.split(":", 1)[1].split())
        elif line.startswith("ob="):
            ob = _lookup(ob_names, line[3:])
        elif line.startswith("cob="):
            cob = _lookup(ob_names, line[4:])
        elif line.startswith("fn="):
            fn = _lookup(fn_names, line[3:])
            d.fn_obj.setdefault(fn, ob)
            cfn = None
            cob = ob
        elif line.startswith("cfn="):
            cfn = _lookup(fn_names, line[4:])
        elif line.startswith("calls="):
            pending = int(line[6:].split()[0])
        elif line.startswith(("summary:", "totals:")):
            total = max(total, int(line.split()[1]))
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            parts = line.split()
            ir = int(parts[positions]) if len(parts) > positions else 0
            if pending is not None:
                if cfn is not None:
                    d.fn_obj.setdefault(cfn, cob)
                    d.calls[(fn, cfn)] += pending
                    d.edges[(fn, cfn)] += ir
                pending = None
                cob = ob
            elif fn is not None:
                d.self_ir[fn] += ir
    d.total += total
    return d
