#!/usr/bin/env python3
"""Independent oracle for `jfsops warmup`: the blocks that hold file byte ranges.

usage: warmup_oracle.py DUMP.json BLOCKSIZE VOLNAME RANGES

DUMP.json is `juicefs dump` output; RANGES has lines "PATH OFFSET LENGTH"
(PATH relative to the volume root). Implements spec §8.2 from the dump's
chunk lists (later slices win, holes need no block, the file length cuts)
and prints one JSON line per distinct block:
  {"key": "VOL/chunks/...", "size": N, "kind": "start|zero|partial", "anchor": FILEOFF}
where anchor/kind tell where the block's first byte is visible in the file.
"""
import json
import sys

CHUNK = 64 << 20


def find(tree, path):
    node = tree
    for part in [p for p in path.split("/") if p]:
        node = node["entries"][part]
    return node


def visible(slices):
    """Overlay the records in order; returns [(pos, id, size, off, len)]."""
    segs = []
    for s in slices:
        pos, ln = s.get("pos", 0), s["len"]
        if ln == 0:
            continue
        rec = (pos, s["id"], s["size"], s.get("off", 0), ln)
        out = []
        for (p, i, sz, o, l) in segs:
            e = p + l
            if e <= pos or p >= pos + ln:
                out.append((p, i, sz, o, l))
                continue
            if p < pos:
                out.append((p, i, sz, o, pos - p))
            if e > pos + ln:
                cut = pos + ln
                out.append((cut, i, sz, o + (cut - p), e - cut))
        out.append(rec)
        segs = sorted(out)
    return segs


def key(vol, sid, indx, bsize):
    return "%s/chunks/%d/%d/%d_%d_%d" % (vol, sid // 1000000, sid // 1000, sid, indx, bsize)


def main():
    dump, bs, vol, ranges = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    tree = json.load(open(dump))["FSTree"]
    blocks = {}
    for line in open(ranges):
        if not line.strip():
            continue
        path, off, ln = line.rsplit(None, 2)
        off, ln = int(off), int(ln)
        node = find(tree, path)
        flen = node["attr"]["length"]
        end = min(off + ln, flen)
        chunks = {c["index"]: c["slices"] for c in node.get("chunks", [])}
        for ci in range(off // CHUNK, (end - 1) // CHUNK + 1) if end > off else []:
            base = ci * CHUNK
            lo, hi = max(off, base) - base, min(end, base + CHUNK) - base
            segs = visible(chunks.get(ci, []))
            for (p, sid, size, o, l) in segs:
                s, e = max(lo, p), min(hi, p + l)
                if s >= e or sid == 0:
                    continue
                a, b = o + s - p, o + e - p
                for bi in range(a // bs, (b - 1) // bs + 1):
                    bstart = bi * bs
                    anchor, kind = None, "partial"
                    for (p2, sid2, size2, o2, l2) in segs:
                        if sid2 == sid and o2 <= bstart < o2 + l2:
                            fo = base + p2 + bstart - o2
                            if fo < flen:
                                anchor = fo
                                kind = "zero" if fo == 0 else "start"
                                break
                    if anchor is None:
                        anchor = base + p + max(o, bstart) - o
                    k = key(vol, sid, bi, min(bs, size - bstart))
                    rank = {"start": 0, "zero": 1, "partial": 2}
                    if k not in blocks or rank[kind] < rank[blocks[k]["kind"]]:
                        blocks[k] = {"key": k, "size": min(bs, size - bstart), "kind": kind,
                                     "anchor": anchor, "flen": flen}
    for k in sorted(blocks):
        print(json.dumps(blocks[k]))


if __name__ == "__main__":
    main()
