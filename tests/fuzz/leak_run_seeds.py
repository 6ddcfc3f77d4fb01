#!/usr/bin/env python3
# tests/fuzz/leak_run_seeds.py [DIR]: write the seeds of the leak_run fuzz
# target (default tests/fuzz/corpus/leak_run): valid reference runs behind
# the header fuzz_leak_run.c reads, their frames made by the zstd CLI.
import os
import struct
import subprocess
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "leak_run")
def zframe(recs):
    raw = b"".join(recs)
    return subprocess.run(["zstd", "-q", "-c", "--check", "-1"], input=raw, capture_output=True, check=True).stdout
def rec(i, size, cls=0):
    return struct.pack(">QIB3x", i, size, cls)
def run(cells, step, dens):
    # cells: {cell: [ids]}
    body = b""; idx = []
    n = 0
    for c in sorted(cells):
        recs = [rec(i, 65536 + i % 7) for i in sorted(cells[c])]
        idx.append((c, len(body), len(recs)))
        body += zframe(recs)
        n += len(recs)
    ib = b"".join(struct.pack("<QQQ", *e) for e in idx)
    db = b"".join(struct.pack("<QQ", b, k) for b, k in dens)
    return body + ib + db, len(idx), len(dens), n
def seed(name, step_sel, lo_cell, ncells, cells, dens):
    step = (step_sel % 4 + 1) * 1000
    f, nfr, nd, n = run(cells, step, dens)
    hdr = bytes([step_sel, lo_cell, ncells]) + struct.pack("<HB", nfr, nd) + struct.pack("<Q", n)
    open(os.path.join(out, name), "wb").write(hdr + f)
seed("three_cells_all", 0, 0, 0, {0: [5, 7, 999], 2: [2000, 2001], 5: [5500]}, [(0, 3), (1, 4)])
seed("three_cells_window", 0, 2, 2, {0: [5, 7, 999], 2: [2000, 2001], 3: [3999], 5: [5500]}, [(0, 5)])
seed("step2000", 1, 1, 1, {0: [1, 1999], 1: [2000, 3999], 2: [4000]}, [(0, 2), (2, 1)])
seed("empty_run", 0, 0, 0, {}, [])
seed("dup_refs", 0, 0, 0, {1: [1500, 1500, 1500]}, [(0, 3)])
