#!/usr/bin/env python3
"""Compare `jfsops info --json` with the counts from dumpcount.py.

usage: cmpinfo.py WANT.json INFO.json
Exit 0 when every field matches, 1 (listing the differences) otherwise.
Where the dump cannot decide one definition, the accepted alternatives are
listed below and the one that matched is printed as a NOTE.
"""
import json
import sys


def main(a):
    want = json.load(open(a[0]))
    try:
        got = json.load(open(a[1]))
    except ValueError as e:
        sys.exit("info output is not one JSON object: %s" % e)
    bad, notes = [], []

    def check(key, alts):
        if key not in got:
            bad.append("%s: missing" % key)
            return
        for label, v in alts:
            if got[key] == v:
                if label:
                    notes.append("%s matched as %s" % (key, label))
                return
        bad.append("%s: jfsops says %r, expected %s" % (
            key, got[key], " or ".join("%r (%s)" % (v, l or "dump") for l, v in alts)))

    for k in ("name", "uuid", "storage", "compression", "trash_days", "files", "pending_files"):
        check(k, [("", want[k])])
    if str(got.get("bucket", "")).rstrip("/") != str(want["bucket"]).rstrip("/"):
        bad.append("bucket: jfsops says %r, dump %r" % (got.get("bucket"), want["bucket"]))
    check("block_size", [("", want["block_size"])])
    check("dirs", [("", want["dirs"]), ("with trash dirs", want["dirs"] + want["trash_dirs"])])
    pc = want.get("pending_chunks", 0)
    pr = want.get("pending_slice_records", 0)
    check("chunks", [("", want["chunks"] + pc)] + ([("without pending files", want["chunks"])] if pc else []))
    check("slice_records", [("", want["slice_records"] + pr)] +
          ([("without pending files", want["slice_records"])] if pr else []))
    # distinct ids: pending files' slices are distinct from live ones
    ps = want.get("pending_slices", 0)
    check("slices", [("", want["slices"] + ps)] + ([("without pending files", want["slices"])] if ps else []))
    if "delayed_slices" in want:
        alts = [("", want["delayed_slices"])]
        if want["delayed_entries"] != want["delayed_slices"]:
            alts.append(("delSlices entries", want["delayed_entries"]))
        check("delayed_slices", alts)
    h = {str(k): v for k, v in (got.get("hist") or {}).items()}
    if h != want["hist"] and not pc:
        bad.append("hist: jfsops %r, dump %r" % (h, want["hist"]))
    elif h != want["hist"]:
        # pending files' chunks may be in the histogram: totals must still agree
        if sum(h.values()) != sum(want["hist"].values()) + pc:
            bad.append("hist: jfsops %r, dump %r (+%d pending chunks)" % (h, want["hist"], pc))
        else:
            notes.append("hist includes pending files' chunks")
    for n in notes:
        print("NOTE: " + n)
    if bad:
        print("\n".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
