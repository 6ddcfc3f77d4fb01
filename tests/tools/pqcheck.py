#!/usr/bin/env python3
"""Check Parquet files written by common/parquet.c against what was put in.

usage: pqcheck.py DIR

Every DIR/NAME.parquet has a DIR/NAME.jsonl beside it, written by the C test:
line 1 a header {"columns": [{"name", "type", "nullable"}], "page_bytes",
"row_group_bytes", "min_row_groups", "min_pages"}, then one JSON array per
row: integers, booleans, null, and strings/binaries as hex.

Each file is read with pyarrow and with DuckDB and must give back the schema
(names, types, nullability) and every value in order. Then, per row group and
column chunk, computed here from the expected rows alone: num_values, the
codec (ZSTD), null_count and min/max (pyarrow's statistics, DuckDB's
parquet_metadata), or no min/max when the chunk has no value or a string
bound is longer than 4096 bytes. Filters on present values through both
readers (which skip row groups by those statistics) count the right rows.
The pages of every chunk are walked (a small Thrift compact reader):
DataPage V1 headers whose value counts and sizes add up to the chunk's, each
page's raw size within page_bytes plus its largest value, each row group's
compressed size within row_group_bytes plus one row and the pages' flush.
Prints what differs; exit 1 if anything does.
"""
import glob
import json
import os
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

STAT_MAX = 4096
PA_TYPES = {
    "int64": pa.int64(), "int32": pa.int32(), "string": pa.string(),
    "timestamp_ns": pa.timestamp("ns", tz="UTC"), "bool": pa.bool_(), "binary": pa.binary(),
    "timestamp_us": pa.timestamp("us", tz="UTC"),
}
DUCK_TYPES = {
    "int64": "BIGINT", "int32": "INTEGER", "string": "VARCHAR",
    "timestamp_ns": "TIMESTAMPTZ_NS", "bool": "BOOLEAN", "binary": "BLOB",
    "timestamp_us": "TIMESTAMP WITH TIME ZONE",
}


class Problems(list):
    def add(self, path, msg):
        self.append("%s: %s" % (os.path.basename(path), msg))


def load_expected(path):
    with open(path, encoding="utf-8") as f:
        head = json.loads(f.readline())
        rows = [json.loads(line) for line in f]
    for row in rows:
        for j, col in enumerate(head["columns"]):
            if row[j] is not None and col["type"] in ("string", "binary"):
                row[j] = bytes.fromhex(row[j])
    return head, rows


def as_expected(col, v):
    """A reader's value in the form of the expected one (strings as bytes)."""
    if v is None:
        return None
    if col["type"] == "string":
        return v.encode("utf-8")
    if col["type"] == "binary":
        return bytes(v)
    return v


def short(v):
    r = repr(v)
    return r if len(r) < 80 else r[:60] + "...(%d chars)" % len(r)


def compare_rows(path, who, cols, got, rows, probs):
    """got: one list per column, as the reader gave them."""
    for j, col in enumerate(cols):
        g = [as_expected(col, v) for v in got[j]] if col["type"] in ("string", "binary") \
            else got[j]
        e = [r[j] for r in rows]
        if len(g) != len(e):
            probs.add(path, "%s: column %s: %d rows, expected %d"
                      % (who, col["name"], len(g), len(e)))
            continue
        if g == e:  # the schema checks fixed the types already
            continue
        for i, (v, w) in enumerate(zip(g, e)):
            if v != w or type(v) is not type(w):
                probs.add(path, "%s: row %d column %s: %s, expected %s"
                          % (who, i, col["name"], short(v), short(w)))
                break


# --- a minimal Thrift compact reader, enough to walk page headers ---

def uvarint(buf, pos):
    shift = val = 0
    while True:
        b = buf[pos]
        pos += 1
        val |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return val, pos


def zigzag(n):
    return (n >> 1) ^ -(n & 1)


def read_value(buf, pos, t):
    if t in (1, 2):                     # bool inside a list: one byte
        return buf[pos] == 1, pos + 1
    if t == 3:
        return buf[pos], pos + 1
    if t in (4, 5, 6):
        v, pos = uvarint(buf, pos)
        return zigzag(v), pos
    if t == 7:
        return buf[pos:pos + 8], pos + 8
    if t == 8:
        n, pos = uvarint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if t in (9, 10):
        h = buf[pos]
        pos += 1
        n, et = h >> 4, h & 0xF
        if n == 15:
            n, pos = uvarint(buf, pos)
        out = []
        for _ in range(n):
            v, pos = read_value(buf, pos, et)
            out.append(v)
        return out, pos
    if t == 12:
        return read_struct(buf, pos)
    raise ValueError("thrift type %d" % t)


def read_struct(buf, pos):
    fields, last = {}, 0
    while True:
        h = buf[pos]
        pos += 1
        if h == 0:
            return fields, pos
        t, delta = h & 0xF, h >> 4
        if delta:
            fid = last + delta
        else:
            v, pos = uvarint(buf, pos)
            fid = zigzag(v)
        last = fid
        if t in (1, 2):
            fields[fid] = t == 1
        else:
            fields[fid], pos = read_value(buf, pos, t)


def walk_pages(path, data, cc, page_bytes, max_val, probs):
    """Check the pages of one column chunk; return their count."""
    pos, end = cc.data_page_offset, cc.data_page_offset + cc.total_compressed_size
    npages = nvals = raw = 0
    while pos < end:
        hdr, body = read_struct(data, pos)
        if hdr.get(1) != 0 or 5 not in hdr:
            probs.add(path, "page at %d is not a DataPage V1: %r" % (pos, hdr))
            return npages
        dph = hdr[5]
        if dph.get(2) != 0 or dph.get(3) != 3:
            probs.add(path, "page at %d: encodings %r" % (pos, dph))
        if hdr[2] > page_bytes + max_val + 64:
            probs.add(path, "page at %d: %d raw bytes (page_bytes %d, largest value %d)"
                      % (pos, hdr[2], page_bytes, max_val))
        raw += body - pos + hdr[2]
        pos = body + hdr[3]
        nvals += dph[1]
        npages += 1
    if pos != end:
        probs.add(path, "column %s: pages end at %d, chunk at %d" % (cc.path_in_schema, pos, end))
    if nvals != cc.num_values:
        probs.add(path, "column %s: pages hold %d values, chunk %d"
                  % (cc.path_in_schema, nvals, cc.num_values))
    if raw != cc.total_uncompressed_size:
        probs.add(path, "column %s: pages %d raw bytes, chunk says %d"
                  % (cc.path_in_schema, raw, cc.total_uncompressed_size))
    return npages


def value_size(col, v):
    if v is None:
        return 0
    if col["type"] in ("string", "binary"):
        return 4 + len(v)
    return 4 if col["type"] == "int32" else 8


def check_metadata(path, head, rows, probs):
    cols = head["columns"]
    pf = pq.ParquetFile(path)
    md = pf.metadata
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        probs.add(path, "no PAR1 magic at both ends")
    if not md.created_by.startswith("jfsops version "):
        probs.add(path, "created_by %r" % md.created_by)
    if md.num_rows != len(rows):
        probs.add(path, "num_rows %d, expected %d" % (md.num_rows, len(rows)))
    if md.num_row_groups < head.get("min_row_groups", 0):
        probs.add(path, "%d row groups, expected at least %d"
                  % (md.num_row_groups, head["min_row_groups"]))
    for j, col in enumerate(cols):
        if md.schema.column(j).max_definition_level != (1 if col["nullable"] else 0):
            probs.add(path, "column %s: max definition level" % col["name"])
    max_row = max((sum(value_size(c, r[j]) + 1 for j, c in enumerate(cols)) for r in rows),
                  default=0)
    start = pages = 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        part = rows[start:start + rg.num_rows]
        start += rg.num_rows
        if rg.num_rows == 0:
            probs.add(path, "row group %d is empty" % g)
        size = sum(rg.column(j).total_compressed_size for j in range(len(cols)))
        slack = max_row + len(cols) * (head["page_bytes"] // 128 + 256)
        if size > head["row_group_bytes"] + slack:
            probs.add(path, "row group %d: %d bytes, row_group_bytes %d"
                      % (g, size, head["row_group_bytes"]))
        if rg.total_byte_size != sum(rg.column(j).total_uncompressed_size
                                     for j in range(len(cols))):
            probs.add(path, "row group %d: total_byte_size %d" % (g, rg.total_byte_size))
        for j, col in enumerate(cols):
            cc = rg.column(j)
            vals = [r[j] for r in part if r[j] is not None]
            where = "row group %d column %s" % (g, col["name"])
            if cc.num_values != len(part) or cc.compression != "ZSTD":
                probs.add(path, "%s: num_values %d codec %s" % (where, cc.num_values,
                                                                cc.compression))
            max_val = max((value_size(col, v) for v in vals), default=0)
            pages += walk_pages(path, data, cc, head["page_bytes"], max_val, probs)
            st = cc.statistics
            if st is None or st.null_count != len(part) - len(vals):
                probs.add(path, "%s: null_count %s, expected %d"
                          % (where, st and st.null_count, len(part) - len(vals)))
                continue
            want = bool(vals)
            if want:
                lo, hi = min(vals), max(vals)
                if col["type"] in ("string", "binary") and max(len(lo), len(hi)) > STAT_MAX:
                    want = False
            if st.has_min_max != want:
                probs.add(path, "%s: has_min_max %s, expected %s" % (where, st.has_min_max, want))
            elif want and (st.min_raw != lo or st.max_raw != hi):
                probs.add(path, "%s: min/max %s/%s, expected %s/%s"
                          % (where, short(st.min_raw), short(st.max_raw), short(lo), short(hi)))
    if start != len(rows):
        probs.add(path, "row groups hold %d rows, expected %d" % (start, len(rows)))
    if pages < head.get("min_pages", 0):
        probs.add(path, "%d pages, expected at least %d" % (pages, head["min_pages"]))


def check_pyarrow(path, head, rows, probs):
    cols = head["columns"]
    t = pq.read_table(path)
    fields = [(f.name, f.type, f.nullable) for f in t.schema]
    want = [(c["name"], PA_TYPES[c["type"]], c["nullable"]) for c in cols]
    if fields != want:
        probs.add(path, "pyarrow schema %s, expected %s" % (fields, want))
        return
    arrays = []
    for c, a in zip(cols, t.columns):
        arrays.append(a.cast(pa.int64()) if c["type"].startswith("timestamp") else a)
    compare_rows(path, "pyarrow", cols, [a.to_pylist() for a in arrays], rows, probs)


def probes(col, rows, j):
    """Values to filter on: the smallest, the largest and a middle one."""
    vals = sorted({r[j] for r in rows if r[j] is not None})
    if not vals:
        return []
    return sorted({vals[0], vals[-1], vals[len(vals) // 2]})


def check_filters(path, head, rows, con, probs):
    for j, col in enumerate(head["columns"]):
        if col["type"] not in ("int64", "int32", "string"):
            continue
        for v in probes(col, rows, j):
            n = sum(1 for r in rows if r[j] == v)
            pv = v.decode("utf-8") if col["type"] == "string" else v
            got = con.execute('SELECT count(*) FROM read_parquet(?) WHERE "%s" = ?'
                              % col["name"].replace('"', '""'), [path, pv]).fetchone()[0]
            if got != n:
                probs.add(path, "duckdb: %d rows with %s = %s, expected %d"
                          % (got, col["name"], short(v), n))
            t = pq.read_table(path, filters=[(col["name"], "==", pv)])
            if t.num_rows != n:
                probs.add(path, "pyarrow filter: %d rows with %s = %s, expected %d"
                          % (t.num_rows, col["name"], short(v), n))


def check_duckdb(path, head, rows, probs):
    cols = head["columns"]
    con = duckdb.connect()
    desc = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
    types = [(d[0], d[1]) for d in desc]
    want = [(c["name"], DUCK_TYPES[c["type"]]) for c in cols]
    if types != want:
        probs.add(path, "duckdb schema %s, expected %s" % (types, want))
        return
    sel = []
    for c in cols:
        q = '"%s"' % c["name"].replace('"', '""')
        if c["type"].startswith("timestamp"):
            q = "epoch_%s(%s)" % (c["type"][-2:], q)
        sel.append(q)
    got = con.execute("SELECT %s FROM read_parquet(?, file_row_number = true) "
                      "ORDER BY file_row_number" % ", ".join(sel), [path]).fetchall()
    compare_rows(path, "duckdb", cols, [list(c) for c in zip(*got)] if got else
                 [[] for _ in cols], rows, probs)
    # statistics as DuckDB reads them: null counts, integer and string bounds
    meta = con.execute("SELECT row_group_id, column_id, stats_null_count, stats_min_value, "
                       "stats_max_value, row_group_num_rows FROM parquet_metadata(?) "
                       "ORDER BY row_group_id, column_id", [path]).fetchall()
    starts, acc = {}, 0
    for rg, nrows in sorted({(m[0], m[5]) for m in meta}):
        starts[rg] = acc
        acc += nrows
    for rg, cj, nulls, lo, hi, nrows in meta:
        start = starts[rg]
        col = cols[cj]
        vals = [r[cj] for r in rows[start:start + nrows] if r[cj] is not None]
        if nulls != nrows - len(vals):
            probs.add(path, "duckdb: row group %d column %s: null count %s"
                      % (rg, col["name"], nulls))
        if not vals or col["type"] not in ("int64", "int32", "string"):
            continue
        elo, ehi = min(vals), max(vals)
        if col["type"] == "string":
            if max(len(elo), len(ehi)) > STAT_MAX:
                continue
            elo, ehi = elo.decode("utf-8"), ehi.decode("utf-8")
        else:
            elo, ehi = str(elo), str(ehi)
        if (lo, hi) != (elo, ehi):
            probs.add(path, "duckdb: row group %d column %s: min/max %s/%s, expected %s/%s"
                      % (rg, col["name"], short(lo), short(hi), short(elo), short(ehi)))
    check_filters(path, head, rows, con, probs)
    con.close()


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    probs = Problems()
    files = sorted(glob.glob(os.path.join(sys.argv[1], "*.parquet")))
    if not files:
        print("pqcheck: no .parquet file in %s" % sys.argv[1], file=sys.stderr)
        return 1
    for path in files:
        head, rows = load_expected(path[:-len(".parquet")] + ".jsonl")
        for check in (check_metadata, check_pyarrow, check_duckdb):
            try:
                check(path, head, rows, probs)
            except Exception as e:  # a reader refusing the file is a finding too
                probs.add(path, "%s: %s: %s" % (check.__name__, type(e).__name__, e))
    for p in probs:
        print("FAIL " + p)
    print("pqcheck: %d files, %d problems" % (len(files), len(probs)))
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main())
