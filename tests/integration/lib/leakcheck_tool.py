#!/usr/bin/env python3
"""Helpers for the leakcheck integration tests (independent of jfsops).

  plan DUMP.json KEYS.txt      choose what to plant/remove; prints lines
                               "old KEY SIZE", "recent KEY SIZE", "remove KEY",
                               "decoy KEY" (a live, valid block)
  check OUT.jsonl PLAN.txt [DUMP.json]
                               leakcheck's report must list exactly: the old
                               keys as leaked, the removed as missing, the
                               recent as skipped, nothing else; with the dump,
                               each missing line names the files (inode, path,
                               chunk) whose chunks list its slice
  shard KEY N                  the shard index of KEY (fnv1a-32 % N)
  gcleaked LOG                 "leaked" count of the last `juicefs gc` summary
"""
import json
import re
import sys


def block_key(name, hash_prefix, sid, indx, bsize):
    if hash_prefix:
        return "%s/chunks/%02X/%d/%d_%d_%d" % (name, sid % 256, sid // 1000000, sid, indx, bsize)
    return "%s/chunks/%d/%d/%d_%d_%d" % (name, sid // 1000000, sid // 1000, sid, indx, bsize)


def walk(node, out):
    for c in node.get("chunks", []) or []:
        for s in c.get("slices", []) or []:
            if s.get("id", 0) > 0:
                out.append((s["id"], s["size"]))
    for child in (node.get("entries") or {}).values():
        walk(child, out)


def plan(dump_path, keys_path):
    d = json.load(open(dump_path))
    st = d["Setting"]
    name, hp = st["Name"], bool(st.get("HashPrefix"))
    bs = int(st.get("BlockSize", 4096)) * 1024
    next_chunk = int(d["Counters"]["nextChunk"])
    live = []
    walk(d.get("FSTree", {}), live)
    allrefs = list(live)
    walk(d.get("Trash", {}) or {}, allrefs)
    keys = set(l.split()[0] for l in open(keys_path) if l.strip())
    maxid = max([i for i, _ in allrefs] + [int(k.rsplit("/", 1)[1].split("_")[0]) for k in keys] + [0])
    a, b = maxid + 7, maxid + 9
    if b >= next_chunk:
        sys.exit("plan: no free slice id below the counter %d (max id %d)" % (next_chunk, maxid))
    # an unreferenced slice of 1.5 blocks: two old leaked objects
    print("old", block_key(name, hp, a, 0, bs), bs)
    print("old", block_key(name, hp, a, 1, bs // 2), bs // 2)
    # a block past the end of a live slice: leaked by the size rule
    sid, size = sorted(live)[0]
    nb = (size - 1) // bs + 1
    print("old", block_key(name, hp, sid, nb, 5), 5)
    # an unreferenced young object: skipped
    print("recent", block_key(name, hp, b, 0, 1234), 1234)
    # remove block 0 of a live slice that has an object; keep another as decoy
    cands = []
    for sid, size in sorted(set(live)):
        k = block_key(name, hp, sid, 0, min(bs, size))
        if k in keys:
            cands.append(k)
    if len(cands) < 2:
        sys.exit("plan: not enough live slices")
    print("remove", cands[-1])
    print("decoy", cands[0])


def owners(dump_path):
    """slice id -> {(inode, chunk index, path)} of the files in the dump"""
    d = json.load(open(dump_path))
    own = {}

    def go(node, path):
        a = node.get("attr", {})
        for c in node.get("chunks", []) or []:
            for s in c.get("slices", []) or []:
                if s.get("id", 0) > 0:
                    own.setdefault(s["id"], set()).add((a["inode"], c["index"], path))
        for n, child in (node.get("entries") or {}).items():
            go(child, path + "/" + n)

    go(d.get("FSTree", {}), "")
    return own


def check_owners(out_path, dump_path):
    own = owners(dump_path)
    bad = 0
    for l in open(out_path):
        r = json.loads(l)
        if r["type"] != "missing":
            continue
        want = own.get(r["slice"], set())
        got = set((f["inode"], f["chunk"], f["path"]) for f in r.get("files", []))
        # hard links: a path of the dump's, named once per inode
        if not want or len(got) != min(len(want), 8) or not all(
                any(g[:2] == w[:2] and (g[2] == w[2] or g[2] is None) for w in want) for g in got):
            bad = 1
            print("check: missing %s: files %s, the dump says %s" % (r["key"], sorted(got, key=str), sorted(want)),
                  file=sys.stderr)
    return bad


def check(out_path, plan_path, dump_path=None):
    want = {"leaked": set(), "missing": set(), "skipped": set()}
    for l in open(plan_path):
        f = l.split()
        if f[0] == "old":
            want["leaked"].add(f[1])
        elif f[0] == "remove":
            want["missing"].add(f[1])
        elif f[0] == "recent":
            want["skipped"].add(f[1])
    got = {}
    for l in open(out_path):
        r = json.loads(l)
        got.setdefault(r["type"], set()).add(r["key"])
    bad = 0
    for t in set(want) | set(got):
        w, g = want.get(t, set()), got.get(t, set())
        if w != g:
            bad = 1
            print("check: %s: expected %s, got %s" % (t, sorted(w), sorted(g)), file=sys.stderr)
    if dump_path:
        bad |= check_owners(out_path, dump_path)
    sys.exit(bad)


def fnv1a32(s):
    h = 0x811C9DC5
    for c in s.encode():
        h ^= c
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def gcleaked(log):
    last = None
    for l in open(log, errors="replace"):
        m = re.search(r"scanned \d+ objects, .* (\d+) leaked \((\d+) bytes\)", l)
        if m:
            last = m.group(1)
    if last is None:
        sys.exit("gcleaked: no summary line in %s" % log)
    print(last)


def main(a):
    if not a:
        sys.exit(__doc__)
    if a[0] == "plan":
        plan(a[1], a[2])
    elif a[0] == "check":
        check(a[1], a[2], a[3] if len(a) > 3 else None)
    elif a[0] == "shard":
        print(fnv1a32(a[1]) % int(a[2]))
    elif a[0] == "gcleaked":
        gcleaked(a[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
