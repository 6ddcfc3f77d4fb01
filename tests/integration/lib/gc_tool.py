#!/usr/bin/env python3
"""Helpers for the gc integration tests (independent of jfsops).

  write DIR MIRROR SEED COUNT [BIG]
                                COUNT files of random sizes (some multi-block)
                                under DIR; their sha256 go to MIRROR (one
                                "sha path" a line). About a quarter are copies
                                made with os.copy_file_range, so the slices
                                are shared and their refcounts exceed 1.
                                One in 20 is big: BIG*4/9 to BIG bytes
                                (default BIG 9 MiB: two or three 4 MiB blocks).
  remove DIR MIRROR SEED        remove about half the files (originals and
                                copies alike); MIRROR keeps the rest
  verify DIR MIRROR             every file of MIRROR reads back the same
  refkeys DUMP.json             the block keys the dump references, one a line
                                (live tree and trash)
  drift DUMP.json               "SPACE INODES": the volume's usedSpace/usedInodes
                                counters minus what its inodes add up to (live
                                tree and trash, each inode once, roots left out);
                                a correct unlink/rmdir leaves both unchanged
  gcline LOG                    "scanned ... leaked ..." line of `juicefs gc`
  gccount LOG WHAT              a count from that line (leaked, pending, compacted)
"""
import hashlib
import json
import os
import random
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from leakcheck_tool import block_key, walk  # noqa: E402  (the dump's block keys)


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def write(d, mirror, seed, count, big=9 << 20):
    rng = random.Random(int(seed))
    count = int(count)
    big = int(big)
    os.makedirs(d, exist_ok=True)
    out = []
    originals = []
    for i in range(count):
        sub = os.path.join(d, "d%02d" % (i % 10))
        os.makedirs(sub, exist_ok=True)
        p = os.path.join(sub, "f%05d" % i)
        if originals and rng.random() < 0.25:
            src = rng.choice(originals)
            with open(src, "rb") as fi, open(p, "wb") as fo:
                n = os.fstat(fi.fileno()).st_size
                off = 0
                while off < n:
                    c = os.copy_file_range(fi.fileno(), fo.fileno(), n - off, off, off)
                    if c <= 0:
                        raise SystemExit("copy_file_range returned %d" % c)
                    off += c
        else:
            r = rng.random()
            if r < 0.05:
                size = rng.randrange(big * 4 // 9, big)   # several blocks
            elif r < 0.1:
                size = 0
            else:
                size = rng.randrange(1, 300 << 10)
            with open(p, "wb") as f:
                f.write(rng.randbytes(size))
            originals.append(p)
        out.append(p)
    with open(mirror, "w") as m:
        for p in out:
            m.write("%s %s\n" % (sha(p), os.path.relpath(p, d)))


def remove(d, mirror, seed):
    rng = random.Random(int(seed) + 1)
    keep = []
    for line in open(mirror):
        h, rel = line.split(None, 1)
        rel = rel.strip()
        if rng.random() < 0.5:
            os.unlink(os.path.join(d, rel))
        else:
            keep.append((h, rel))
    with open(mirror, "w") as m:
        for h, rel in keep:
            m.write("%s %s\n" % (h, rel))
    print(len(keep))


def verify(d, mirror):
    bad = 0
    n = 0
    for line in open(mirror):
        h, rel = line.split(None, 1)
        rel = rel.strip()
        n += 1
        if sha(os.path.join(d, rel)) != h:
            print("content differs: " + rel, file=sys.stderr)
            bad += 1
    if bad:
        sys.exit("%d of %d files differ" % (bad, n))
    print("%d files verified" % n, file=sys.stderr)


def refkeys(dump):
    d = json.load(open(dump))
    st = d["Setting"]
    name, hp = st["Name"], bool(st.get("HashPrefix"))
    bs = int(st.get("BlockSize", 4096)) * 1024
    refs = []
    walk(d.get("FSTree", {}), refs)
    walk(d.get("Trash", {}) or {}, refs)
    for sid, size in sorted(set(refs)):
        nb = (size - 1) // bs + 1
        for i in range(nb):
            print(block_key(name, hp, sid, i, min(bs, size - i * bs)))


def drift(dump):
    d = json.load(open(dump))
    seen = {}

    def visit(node):
        a = node["attr"]
        if a["type"] == "regular":
            n = a.get("length", 0)
            seen[a["inode"]] = 4096 if n == 0 else ((n - 1) // 4096 + 1) * 4096
        else:
            seen[a["inode"]] = 4096
        for child in (node.get("entries") or {}).values():
            visit(child)

    visit(d["FSTree"])
    if d.get("Trash"):
        visit(d["Trash"])
    for root in (1, 0x7FFFFFFF10000000):
        seen.pop(root, None)
    c = d["Counters"]
    print(c["usedSpace"] - sum(seen.values()), c["usedInodes"] - len(seen))


def gcline(log):
    line = ""
    for l in open(log, errors="replace"):
        if "scanned" in l and "leaked" in l:
            line = l.strip()
    if not line:
        sys.exit("no gc summary line in " + log)
    return re.sub(r".*<INFO>: ", "", line)


def gccount(log, what):
    line = gcline(log)
    pat = {"leaked": r"(\d+) leaked", "pending": r"(\d+) pending delete",
           "compacted": r"(\d+) compacted", "scanned": r"scanned (\d+)"}[what]
    m = re.search(pat, line)
    if not m:
        sys.exit("no '%s' count in: %s" % (what, line))
    print(m.group(1))


def main(a):
    if a[0] == "write":
        write(*a[1:6])
    elif a[0] == "remove":
        remove(*a[1:4])
    elif a[0] == "verify":
        verify(*a[1:3])
    elif a[0] == "refkeys":
        refkeys(a[1])
    elif a[0] == "drift":
        drift(a[1])
    elif a[0] == "gcline":
        print(gcline(a[1]))
    elif a[0] == "gccount":
        gccount(a[1], a[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
