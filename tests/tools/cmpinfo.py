#!/usr/bin/env python3
"""Compare `jfsops info --json` with the counts from dumpcount.py (run with
the META-URL, so pending files' chunks and delayed slices are included).

usage: cmpinfo.py WANT.json INFO.json
Definitions (those of jfsops info): every chunk record of the metadata counts,
including the chunks still held by pending removed files; records = all slice
records, slice_records = records with a non-zero id; slices = distinct ids
over chunks and delayed slices; delayed_slices = 12-byte delayed records;
dirs include the trash directories; hist buckets records-per-chunk into
1, 2, 3-4, 5-8, ..., 1025-2048... with the last bucket ">1024".
Exit 0 when every field matches, 1 (listing the differences) otherwise.
"""
import json
import sys

NBUCKETS = 12


def bucket_label(n):
    b, lim = 0, 1
    while n > lim and b < NBUCKETS - 1:
        lim <<= 1
        b += 1
    if b == 0:
        return "1"
    if b == 1:
        return "2"
    if b == NBUCKETS - 1:
        return ">%d" % (1 << (b - 1))
    return "%d-%d" % ((1 << (b - 1)) + 1, 1 << b)


def main(a):
    want = json.load(open(a[0]))
    try:
        got = json.load(open(a[1]))
    except ValueError as e:
        sys.exit("info output is not one JSON object: %s" % e)
    bad = []

    def check(key, v):
        if key not in got:
            bad.append("%s: missing" % key)
        elif got[key] != v:
            bad.append("%s: jfsops says %r, juicefs dump/db %r" % (key, got[key], v))

    for k in ("name", "uuid", "storage", "compression", "trash_days", "files",
              "pending_files", "block_size", "delayed_slices", "delayed_entries", "slices"):
        check(k, want[k])
    if str(got.get("bucket", "")).rstrip("/") != str(want["bucket"]).rstrip("/"):
        bad.append("bucket: jfsops says %r, dump %r" % (got.get("bucket"), want["bucket"]))
    check("dirs", want["dirs"] + want["trash_dirs"] + want["trash_root_node"])
    check("chunks", want["chunks"] + want["pending_chunks"])
    check("records", want["records"] + want["pending_records"])
    check("slice_records", want["slice_records"] + want["pending_slice_records"])
    h = {}
    for src in (want["hist"], want["pending_hist"]):
        for n, c in src.items():
            lab = bucket_label(int(n))
            h[lab] = h.get(lab, 0) + c
    check("hist", h)
    if bad:
        print("\n".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
