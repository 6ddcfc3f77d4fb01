#!/usr/bin/env python3
"""Helpers of the crash campaign (tests/chaos/run.sh), independent of jfsops.

  plant DUMP.json KEYS.txt SEED N   choose N leaked objects to plant: valid block
                                    keys of slice ids below the slice counter
                                    that nothing references and the bucket does
                                    not hold (some slices of two blocks), plus
                                    blocks past the end of live slices (leaked by
                                    the size rule); prints "leak KEY SIZE" lines,
                                    then two "decoy KEY SIZE" lines (live blocks)
  put file DIR PLAN                 write the plan's leak objects (random bytes)
                                    under DIR, mtime three hours back
  put s3 EP AK SK BUCKET PLAN       the same into an S3 bucket
  report REPORT.jsonl PLAN          leakcheck's report lists exactly the plan's
                                    leaks as leaked, nothing missing or skipped
  leftovers REPORT.jsonl COUNTER    a report after killed compactions: nothing
                                    missing, every leaked object has a slice id
                                    >= COUNTER (allocated by the compactions);
                                    prints "LEAKED FOREIGN" (counts) and writes
                                    the foreign keys to REPORT.jsonl.foreign
  syncmut DIR SEED                  create (first call) or change a tree for
                                    sync: about a tenth of its files changed,
                                    added and removed, one big file replaced
  dirmd5 DIR                        "relpath md5" of every file, sorted (JuiceFS/
                                    jfsops temp files ".jfs.*.tmp.*" left out)
  s3md5 EP AK SK BUCKET PREFIX      "relkey md5" of every object under PREFIX
                                    (each object read back in full), sorted
  keys FILE...                      the "key" of every line of JSON-lines files
  last FILE FIELD                   FIELD of the last JSON line of FILE
"""
import hashlib
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import s3util  # noqa: E402

BIG_MIN, BIG_MAX = 6 << 20, 14 << 20


# the block-key layout and the dump walk are gc_tool's (one copy)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration", "lib"))
from gc_tool import block_key, walk  # noqa: E402


def plant(dump, keys_path, seed, n):
    rng = random.Random(int(seed))
    n = int(n)
    d = json.load(open(dump))
    st = d["Setting"]
    name, hp = st["Name"], bool(st.get("HashPrefix"))
    bs = int(st.get("BlockSize", 4096)) * 1024
    counter = int(d["Counters"]["nextChunk"])
    live = []
    walk(d.get("FSTree", {}), live)
    walk(d.get("Trash", {}) or {}, live)
    live = set(live)  # a slice listed under two names counts once
    used = set(i for i, _ in live)
    for line in open(keys_path):
        k = line.split()[0] if line.strip() else ""
        if "/chunks/" in k:
            try:
                used.add(int(k.rsplit("/", 1)[1].split("_")[0]))
            except ValueError:
                pass
    # below the counter by a margin: engines differ on whether it names the
    # last id handed out or the next one
    free = [i for i in range(1, counter - 1) if i not in used]
    if len(free) < n:
        sys.exit("plant: only %d free slice ids below the counter %d" % (len(free), counter))
    ids = rng.sample(free, n)
    out = []
    for k, sid in enumerate(ids):
        if k < 3:  # a slice of two blocks
            tail = rng.randrange(1, 64 << 10)
            out.append(("leak", block_key(name, hp, sid, 0, bs), bs))
            out.append(("leak", block_key(name, hp, sid, 1, tail), tail))
        else:
            size = rng.randrange(1, 64 << 10)
            out.append(("leak", block_key(name, hp, sid, 0, size), size))
    lv = sorted(live)
    for sid, size in rng.sample(lv, min(2, len(lv))):  # past the end of a live slice
        nb = (size - 1) // bs + 1
        out.append(("leak", block_key(name, hp, sid, nb, 7), 7))
    for sid, size in rng.sample(lv, min(2, len(lv))):
        out.append(("decoy", block_key(name, hp, sid, 0, min(bs, size)), min(bs, size)))
    for kind, key, size in out:
        print(kind, key, size)


def plan_leaks(plan):
    return [(f[1], int(f[2])) for f in (l.split() for l in open(plan)) if f and f[0] == "leak"]


def put(args):
    if args[0] == "file":
        root, plan = args[1], args[2]
        old = time.time() - 3 * 3600
        for key, size in plan_leaks(plan):
            p = os.path.join(root, key)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(os.urandom(size))
            os.utime(p, (old, old))
    elif args[0] == "s3":
        ep, ak, sk, bucket, plan = args[1:6]
        for key, size in plan_leaks(plan):
            s3util.request(ep, ak, sk, "PUT", bucket, key, body=os.urandom(size))
    else:
        sys.exit(__doc__)


def report(rep, plan):
    want = set(k for k, _ in plan_leaks(plan))
    got = {}
    for line in open(rep):
        r = json.loads(line)
        got.setdefault(r["type"], set()).add(r["key"])
    bad = []
    if got.get("leaked", set()) != want:
        bad.append("leaked: %d planted, %d reported; not reported %s; not planted %s" % (
            len(want), len(got.get("leaked", ())), sorted(want - got.get("leaked", set()))[:5],
            sorted(got.get("leaked", set()) - want)[:5]))
    for t in ("missing", "skipped", "foreign"):
        if got.get(t):
            bad.append("%s: %s" % (t, sorted(got[t])[:5]))
    if bad:
        sys.exit("report: " + "; ".join(bad))


def leftovers(rep, counter):
    counter = int(counter)
    leaked = foreign = 0
    bad = []
    fkeys = []
    for line in open(rep):
        r = json.loads(line)
        if r["type"] == "leaked":
            leaked += 1
            if int(r.get("slice", 0)) < counter:
                bad.append("leaked %s: slice id below %d, not a compaction's" % (r["key"], counter))
        elif r["type"] == "missing":
            bad.append("missing %s" % r["key"])
        elif r["type"] == "foreign":
            foreign += 1
            fkeys.append(r["key"])
        elif r["type"] == "skipped":
            bad.append("skipped %s" % r["key"])
    with open(rep + ".foreign", "w") as f:
        for k in fkeys:
            f.write(k + "\n")
    if bad:
        sys.exit("leftovers: " + "; ".join(bad[:10]))
    print(leaked, foreign)


def syncmut(d, seed):
    rng = random.Random(int(seed))
    if not os.path.isdir(d) or not os.listdir(d):
        for i in range(150):
            p = os.path.join(d, "d%02d" % (i % 12), "o%04d" % i)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(rng.randbytes(rng.randrange(0, 200 << 10)))
        os.makedirs(os.path.join(d, "zbig"), exist_ok=True)
        for i in range(3):
            with open(os.path.join(d, "zbig", "b%d.bin" % i), "wb") as f:
                f.write(rng.randbytes(rng.randrange(BIG_MIN, BIG_MAX)))
        return
    files = sorted(os.path.relpath(os.path.join(r, f), d)
                   for r, _, fs in os.walk(d) for f in fs)
    small = [f for f in files if not f.startswith("zbig/")]
    for f in rng.sample(small, max(1, len(small) // 10)):   # changed (new size)
        with open(os.path.join(d, f), "wb") as o:
            o.write(rng.randbytes(rng.randrange(1, 200 << 10)))
    for f in rng.sample(small, max(1, len(small) // 10)):   # removed
        if os.path.exists(os.path.join(d, f)):
            os.unlink(os.path.join(d, f))
    for i in range(max(1, len(small) // 10)):                # added
        p = os.path.join(d, "d%02d" % rng.randrange(12), "n%08x" % rng.getrandbits(32))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as o:
            o.write(rng.randbytes(rng.randrange(0, 200 << 10)))
    b = os.path.join(d, "zbig", "b%d.bin" % rng.randrange(3))  # one big file replaced
    with open(b, "wb") as o:
        o.write(rng.randbytes(rng.randrange(BIG_MIN, BIG_MAX)))


def is_temp(name):
    return name.startswith(".jfs.") and ".tmp." in name


def dirmd5(d):
    out = []
    for r, _, fs in os.walk(d):
        for f in fs:
            if is_temp(f):
                continue
            p = os.path.join(r, f)
            with open(p, "rb") as fi:
                out.append((os.path.relpath(p, d), hashlib.md5(fi.read()).hexdigest()))
    for k, h in sorted(out):
        print(k, h)


def s3md5(ep, ak, sk, bucket, prefix):
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    out = []
    for k, _, _ in s3util.list_keys(ep, ak, sk, bucket, prefix):
        out.append((k[len(prefix):], hashlib.md5(s3util.request(ep, ak, sk, "GET", bucket, k)).hexdigest()))
    for k, h in sorted(out):
        print(k, h)


def main(a):
    if not a:
        sys.exit(__doc__)
    cmd = a[0]
    if cmd == "plant":
        plant(*a[1:5])
    elif cmd == "put":
        put(a[1:])
    elif cmd == "report":
        report(a[1], a[2])
    elif cmd == "leftovers":
        leftovers(a[1], a[2])
    elif cmd == "syncmut":
        syncmut(a[1], a[2])
    elif cmd == "dirmd5":
        dirmd5(a[1])
    elif cmd == "s3md5":
        s3md5(*a[1:6])
    elif cmd == "keys":
        for f in a[1:]:
            for line in open(f):
                if line.strip():
                    print(json.loads(line)["key"])
    elif cmd == "last":
        lines = [l for l in open(a[1]) if l.strip()]
        print(json.loads(lines[-1])[a[2]])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
