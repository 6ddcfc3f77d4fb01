#!/usr/bin/env python3
"""Oracles for `jfsops export` (tests/integration/export_engines.sh). Runs
with the test venv's python (pyarrow, duckdb).

export_check.py dump DUMP.json DIR
    DIR/files.parquet, read with pyarrow and with DuckDB (the same rows from
    both), has exactly one row per path of `juicefs dump`'s FSTree with the
    same inode, parent, name, type, mode, uid, gid, atime/mtime/ctime (ns),
    nlink and size, and chunks / slice_records / bytes_stored computed from
    the dump's chunks; DIR/slices.parquet (if any) exactly the dump's slice
    records with an id. _SUCCESS is there and counts the rows.
export_check.py apply PREV INC FULL
    PREV's rows minus the inodes in INC's deleted and files tables, plus
    INC's rows, equal FULL's rows (files, and slices when exported); INC is
    smaller than FULL.
export_check.py read DIR [--parents]
    the tables read back with pyarrow and DuckDB to the same rows; with
    --parents every row's parent is the inode of its path's directory (rows
    of one snapshot).
"""
import json
import os
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

FILES = ["inode", "parent", "path", "name", "type", "size", "mode", "uid", "gid", "atime",
         "mtime", "ctime", "nlink", "chunks", "slice_records", "bytes_stored"]
SLICES = ["slice_id", "size", "inode", "chunk_index", "pos", "off", "len"]


def fail(msg):
    print("export_check: " + msg, file=sys.stderr)
    sys.exit(1)


def rows_arrow(path, cols):
    t = pq.read_table(path)
    if t.column_names != cols:
        fail("%s: columns %s" % (path, t.column_names))
    out = []
    data = {}
    for c in cols:
        col = t.column(c)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        data[c] = col.to_pylist()
    for i in range(t.num_rows):
        out.append(tuple(data[c][i] for c in cols))
    return sorted(out)


def rows_duckdb(path, cols):
    sel = ", ".join("epoch_ns(%s)" % c if c in ("atime", "mtime", "ctime") else c for c in cols)
    return sorted(duckdb.sql("SELECT %s FROM read_parquet('%s')" % (sel, path)).fetchall())


def table(d, name, cols):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    a = rows_arrow(p, cols)
    b = rows_duckdb(p, cols)
    if a != b:
        fail("%s: pyarrow and DuckDB read different rows" % p)
    return a


def success(d):
    p = os.path.join(d, "_SUCCESS")
    if not os.path.exists(p):
        fail("%s: no _SUCCESS" % d)
    return json.load(open(p))


def unescape(name):
    """A name as juicefs dump wrote it (its escape(): %XX for bytes that are
    not UTF-8, controls, space, '%', '"' and backslash) back to bytes, then
    to text as the export writes it: U+FFFD for bytes that are not UTF-8."""
    raw, i = bytearray(), 0
    b = name.encode("utf-8")
    while i < len(b):
        c = b[i]
        if c == 0x25 and i + 2 < len(b) + 0 and all(x in b"0123456789ABCDEF" for x in b[i + 1:i + 3]) \
                and len(b[i + 1:i + 3]) == 2:
            raw.append(int(b[i + 1:i + 3], 16))
            i += 3
            continue
        raw.append(c)
        i += 1
    return bytes(raw).decode("utf-8", "replace")


def from_dump(dump):
    meta = json.load(open(dump))
    files, slices, seen_chunks = [], set(), {}

    def figures(node):
        chunks = node.get("chunks") or []
        recs, stored = 0, 0
        for c in chunks:
            distinct = set()
            for s in c["slices"]:
                if s["id"]:
                    recs += 1
                    distinct.add((s["id"], s["size"]))
            stored += sum(sz for _, sz in distinct)
        return len(chunks), recs, stored

    def walk(node, path, name, parent):
        a = node["attr"]
        ino = a["inode"]
        if node.get("chunks"):
            seen_chunks[ino] = figures(node)
            for c in node["chunks"]:
                for s in c["slices"]:
                    if s["id"]:
                        slices.add((s["id"], s["size"], ino, c["index"], s.get("pos", 0),
                                    s.get("off", 0), s["len"]))
        ns = lambda k: a[k] * 1000000000 + a.get(k + "nsec", 0)
        files.append([ino, parent, path, name, a["type"], a["length"], a["mode"], a["uid"],
                      a["gid"], ns("atime"), ns("mtime"), ns("ctime"), a["nlink"]])
        for n, child in (node.get("entries") or {}).items():
            n = unescape(n)
            walk(child, (path.rstrip("/") + "/" + n), n, ino)

    root = meta["FSTree"]
    walk(root, "/", "", 1)
    out = []
    for f in files:
        c = seen_chunks.get(f[0], (0, 0, 0)) if f[4] == "regular" else (0, 0, 0)
        out.append(tuple(f) + c)
    return sorted(out), sorted(slices)


def cmd_dump(dump, d):
    want, want_slices = from_dump(dump)
    got = table(d, "files.parquet", FILES)
    ok = success(d)
    if got is None:
        fail("no files.parquet")
    root = [r for r in got if r[2] == "/"]
    # juicefs dump has no parent for the root; the export gives its attr's
    if root:
        want = sorted([r if r[2] != "/" else (r[0], root[0][1]) + r[2:] for r in want])
    if got != want:
        show_diff(want, got, "only in dump:   ", "only in export: ")
        fail("files.parquet differs from juicefs dump (%d vs %d rows)" % (len(got), len(want)))
    if ok["rows"]["files"] != len(got):
        fail("_SUCCESS counts %s files rows" % ok["rows"]["files"])
    sl = table(d, "slices.parquet", SLICES)
    if sl is not None and sl != want_slices:
        fail("slices.parquet differs from the dump's slices (%d vs %d)" % (len(sl), len(want_slices)))
    print("dump: %d rows%s equal" % (len(got), "" if sl is None else ", %d slices" % len(sl)))


def show_diff(a, b, only_a, only_b):
    """Up to five rows of each side that the other lacks, on stderr."""
    sa, sb = set(a), set(b)
    for r in sorted(sa - sb)[:5]:
        print(only_a, r, file=sys.stderr)
    for r in sorted(sb - sa)[:5]:
        print(only_b, r, file=sys.stderr)


def cmd_apply(prev, inc, full):
    for name, cols in (("files.parquet", FILES), ("slices.parquet", SLICES)):
        p = table(prev, name, cols)
        if p is None:
            continue
        i = table(inc, name, cols)
        f = table(full, name, cols)
        dl = table(inc, "deleted.parquet", ["inode"])
        if i is None or f is None or dl is None:
            fail("%s: missing in the incremental or full export" % name)
        key = cols.index("inode")
        drop = {r[0] for r in dl} | {r[0] for r in table(inc, "files.parquet", FILES)}
        applied = sorted([r for r in p if r[key] not in drop] + i)
        if applied != f:
            show_diff(applied, f, "applied only:", "full only:   ")
            fail("%s: previous + incremental != full (%d vs %d rows)" % (name, len(applied), len(f)))
        if name == "files.parquet" and len(i) >= len(f):
            fail("the incremental export has %d rows, the full one %d" % (len(i), len(f)))
        print("apply %s: %d + %d rows, %d deleted inodes == %d" % (name, len(p), len(i), len(dl), len(f)))


def cmd_read(d, parents):
    rows = table(d, "files.parquet", FILES)
    success(d)
    by_path = {r[2]: r for r in rows}
    for r in rows if parents else []:
        if r[2] == "/":
            continue
        parent = by_path.get(os.path.dirname(r[2]))
        if parent is None or parent[0] != r[1]:
            fail("%s: parent %d is not its directory's inode" % (r[2], r[1]))
    print("read: %d rows%s" % (len(rows), ", parents consistent" if parents else ""))


def main():
    a = sys.argv[1:]
    if a and a[0] == "dump" and len(a) == 3:
        cmd_dump(a[1], a[2])
    elif a and a[0] == "apply" and len(a) == 4:
        cmd_apply(a[1], a[2], a[3])
    elif a and a[0] == "read" and len(a) in (2, 3):
        cmd_read(a[1], a[2:] == ["--parents"])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
