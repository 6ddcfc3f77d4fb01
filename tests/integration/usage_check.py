#!/usr/bin/env python3
"""Oracles for `jfsops usage` (tests/integration/usage_*.sh).

usage_check.py summary CSV REPORT
    every row of `juicefs summary --strict --csv` (directories, down to its
    --depth) equals the report's dir record: SIZE == space, DIRS == dirs,
    FILES == files.
usage_check.py tree MOUNT REPORT BUCKETS COLD
    walk the mount (lstat, no symlinks followed, the root's virtual entries
    skipped) and check every dir record of the report: bytes, space, files,
    dirs, cold bytes and bytes per age bucket of last access (max(atime,
    mtime)) and last modification, measured from the report's snapshot; the
    trash bytes against MOUNT/.trash.
usage_check.py growth OLD NEW
    every dir record of NEW has growth_bytes/growth_files == NEW - OLD (OLD's
    record of the same path, or 0 when OLD has none, "new": true).
usage_check.py html PAGE.dom REPORT SHOT.png
    the DOM Chromium dumped has one tree row per dir record with the same
    data-bytes/files/dirs, the age bars' segments add up to the bytes, no
    external resource is referenced, and the screenshot is not blank.
"""
import csv
import json
import os
import re
import stat
import struct
import sys
import zlib

VIRTUAL = {".accesslog", ".config", ".stats", ".trash", ".control", ".jfs.control"}


def fail(msg):
    print("usage_check: " + msg, file=sys.stderr)
    sys.exit(1)


def load(path):
    recs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    dirs = {r["path"]: r for r in recs if r["type"] == "dir"}
    summary = [r for r in recs if r["type"] == "summary"]
    if len(summary) != 1:
        fail("%s: %d summary records" % (path, len(summary)))
    return recs, dirs, summary[0]


def align4k(n):
    return 4096 if n == 0 else ((n - 1) // 4096 + 1) * 4096


def parse_age(s):
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
    if s[-1].isdigit():
        return int(s)
    return int(s[:-1]) * units[s[-1]]


def cmd_summary(csv_path, report):
    _, dirs, _ = load(report)
    rows = list(csv.DictReader(open(csv_path)))
    n = 0
    for row in rows:
        p = row["PATH"]
        if not p.endswith("/"):
            continue  # a file, or "..." (the entries juicefs left out)
        path = "/" + p.strip("/") if p != "/" else "/"
        d = dirs.get(path)
        if d is None:
            fail("summary lists %s, the report does not" % path)
        got = (d["space"], d["dirs"], d["files"])
        want = (int(row["SIZE"]), int(row["DIRS"]), int(row["FILES"]))
        if got != want:
            fail("%s: report (space, dirs, files) %s, juicefs summary %s" % (path, got, want))
        n += 1
    if n == 0:
        fail("no directory rows in %s" % csv_path)
    print("summary: %d directories equal" % n)


def bucket_of(edges, age):
    for i, e in enumerate(edges):
        if age < e:
            return i
    return len(edges)


def cmd_tree(mount, report, buckets, cold):
    _, dirs, summary = load(report)
    edges = [parse_age(b) for b in buckets.split(",")]
    cold = parse_age(cold)
    labels = summary["buckets"]
    now = summary["snapshot"]
    root = summary["path"]
    base = os.path.join(mount, root.lstrip("/"))

    def totals(top, rel):
        t = {"bytes": 0, "space": 4096, "files": 0, "dirs": 1, "cold_bytes": 0,
             "access": [0] * len(labels), "modify": [0] * len(labels)}
        sub = {}
        for name in sorted(os.listdir(top)):
            if rel == "/" and root == "/" and name in VIRTUAL:
                continue
            p = os.path.join(top, name)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                child = totals(p, rel.rstrip("/") + "/" + name)
                sub.update(child[1])
                c = child[0]
                for k in ("bytes", "space", "files", "dirs", "cold_bytes"):
                    t[k] += c[k]
                for i in range(len(labels)):
                    t["access"][i] += c["access"][i]
                    t["modify"][i] += c["modify"][i]
                continue
            t["files"] += 1
            t["space"] += align4k(st.st_size)
            if not stat.S_ISREG(st.st_mode):
                continue
            t["bytes"] += st.st_size
            access = max(int(st.st_atime), int(st.st_mtime))
            t["access"][bucket_of(edges, now - access)] += st.st_size
            t["modify"][bucket_of(edges, now - int(st.st_mtime))] += st.st_size
            if now - access >= cold:
                t["cold_bytes"] += st.st_size
        sub[rel] = t
        return t, sub

    _, want = totals(base, root)
    n = 0
    for path, d in dirs.items():
        w = want.get(path)
        if w is None:
            fail("the report lists %s, the mount has no such directory" % path)
        got = {k: d[k] for k in ("bytes", "space", "files", "dirs", "cold_bytes")}
        got["access"] = [d["access"][lab] for lab in labels]
        got["modify"] = [d["modify"][lab] for lab in labels]
        if got != w:
            fail("%s: report %s, mount %s" % (path, got, w))
        n += 1
    top = want[root]
    for k in ("bytes", "space", "files", "dirs", "cold_bytes"):
        if summary[k] != top[k]:
            fail("summary %s = %s, mount %s" % (k, summary[k], top[k]))
    if root == "/":
        trash = 0
        tdir = os.path.join(mount, ".trash")
        for dp, dn, fn in os.walk(tdir):
            for f in fn:
                st = os.lstat(os.path.join(dp, f))
                if stat.S_ISREG(st.st_mode):
                    trash += st.st_size
        if summary["trash_bytes"] != trash:
            fail("trash_bytes %d, the mount's .trash holds %d" % (summary["trash_bytes"], trash))
    print("tree: %d directories equal the mount (%d bytes, %d files)" % (n, top["bytes"], top["files"]))


def cmd_growth(old, new):
    _, od, os_ = load(old)
    _, nd, ns = load(new)
    for path, d in nd.items():
        o = od.get(path)
        want_b = d["bytes"] - (o["bytes"] if o else 0)
        want_f = d["files"] - (o["files"] if o else 0)
        if d.get("growth_bytes") != want_b or d.get("growth_files") != want_f:
            fail("%s: growth %s/%s, want %s/%s" % (path, d.get("growth_bytes"),
                                                   d.get("growth_files"), want_b, want_f))
        if d.get("new") != (o is None):
            fail("%s: new=%s" % (path, d.get("new")))
    if ns.get("growth_bytes") != ns["bytes"] - os_["bytes"]:
        fail("summary growth_bytes %s" % ns.get("growth_bytes"))
    print("growth: %d directories" % len(nd))


def png_pixels(path):
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) to rows of bytes."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                fail("PNG color type %d depth %d" % (ctype, depth))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return rows, bpp


def cmd_html(dom_path, report, shot):
    _, dirs, summary = load(report)
    dom = open(dom_path, encoding="utf-8").read()
    if "<table id=\"tree\"" not in dom:
        fail("no tree table in the DOM")
    for m in re.finditer(r'(?:src|href)\s*=\s*"([^"]*)"', dom):
        fail("the page references %s" % m.group(1))
    if re.search(r"<(script|link|img|iframe)\b", dom):
        fail("the page has a script, link, img or iframe")
    rows = re.findall(r'<tr class="dir"([^>]*)>(.*?)</tr>', dom, re.S)
    if len(rows) != len(dirs):
        fail("%d tree rows in the DOM, %d dir records" % (len(rows), len(dirs)))
    for attrs, body in rows:
        a = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', attrs))
        path = a["path"].replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">") \
            .replace("&quot;", '"').replace("&#39;", "'")
        d = dirs.get(path)
        if d is None:
            fail("DOM row %s is not in the report" % path)
        for k in ("bytes", "files", "dirs", "space"):
            if int(a[k]) != d[k]:
                fail("%s: DOM data-%s %s, report %s" % (path, k, a[k], d[k]))
        for kind in ("access", "modify"):
            m = re.search(r'<svg class="age %s"(.*?)</svg>' % kind, body, re.S)
            if not m:
                fail("%s: no %s bar" % (path, kind))
            segs = [int(x) for x in re.findall(r'class="seg"[^>]*data-bytes="(\d+)"', m.group(1))]
            if sum(segs) != d["bytes"]:
                fail("%s: %s bar adds up to %d, bytes %d" % (path, kind, sum(segs), d["bytes"]))
    tot = re.search(r'<table id="totals"([^>]*)>', dom)
    if not tot or 'data-bytes="%d"' % summary["bytes"] not in tot.group(1):
        fail("the totals table does not say %d bytes" % summary["bytes"])
    px, bpp = png_pixels(shot)
    colors = set()
    for row in px[::4]:
        for x in range(0, len(row), bpp * 4):
            colors.add(row[x:x + 3])
    if len(colors) < 8:
        fail("the screenshot is blank (%d colours)" % len(colors))
    # the age bars are drawn: some pixel of the hottest bucket's red hue
    if not any(c[0] > 180 and c[1] < 90 and c[2] < 90 for c in colors):
        fail("no age bar colour in the screenshot")
    print("html: %d rows, %d colours in the screenshot" % (len(rows), len(colors)))


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    if a[0] == "summary" and len(a) == 3:
        cmd_summary(a[1], a[2])
    elif a[0] == "tree" and len(a) == 5:
        cmd_tree(a[1], a[2], a[3], a[4])
    elif a[0] == "growth" and len(a) == 3:
        cmd_growth(a[1], a[2])
    elif a[0] == "html" and len(a) == 4:
        cmd_html(a[1], a[2], a[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
