#!/usr/bin/env python3
"""Write the Lance datasets the lance integration test scans.

usage: make_datasets.py OUTDIR [--small]

One dataset per data storage version that this pylance writes (legacy, 2.0,
2.1, 2.2, 2.3), each with several versions:
  v1 create (2 fragments), v2 append, v3 delete, v4 add a column.
Columns: int, float, string, binary, fixed-size-list vector, struct, list,
and a blob column (blob v1 on 2.0/2.1); plus ds_blob_v2 (2.2, blob v2
payloads inline and in sidecar files). V1 manifest names are used
for legacy and 2.1, V2 names for the others. Prints one JSON line per
dataset: {"name", "path", "versions", "columns"}.
"""
import json
import os
import sys
import warnings

import pyarrow as pa
import lance

warnings.filterwarnings("ignore")


def table(start, n, blob):
    ids = list(range(start, start + n))
    cols = {
        "i": pa.array(ids, pa.int64()),
        "f": pa.array([x * 0.5 for x in ids], pa.float32()),
        "s": pa.array([f"str-{x}-" + "x" * (x % 37) for x in ids], pa.string()),
        "b": pa.array([bytes([x % 256]) * (x % 50) for x in ids], pa.binary()),
        "vec": pa.FixedSizeListArray.from_arrays(
            pa.array([float(x % 97) for x in ids for _ in range(16)], pa.float32()), 16),
        "st": pa.StructArray.from_arrays(
            [pa.array([x % 1000 for x in ids], pa.int32()),
             pa.array([f"y{x}" for x in ids], pa.string())], names=["x", "y"]),
        "l": pa.array([[x, x + 1, x + 2][: x % 4] for x in ids], pa.list_(pa.int32())),
    }
    fields = [pa.field(k, v.type) for k, v in cols.items()]
    arrays = list(cols.values())
    if blob:
        fields.append(pa.field("blob", pa.large_binary(),
                               metadata={"lance-encoding:blob": "true"}))
        arrays.append(pa.array([os.urandom(200 + (x % 7) * 300) for x in ids],
                               pa.large_binary()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def build(out, fmt, v2names, n1, n2):
    path = os.path.join(out, f"ds_{fmt}")
    blob = fmt in ("2.0", "2.1")
    ds = lance.write_dataset(table(0, n1, blob), path, data_storage_version=fmt,
                             max_rows_per_file=max(1, n1 // 2) + 1,
                             enable_v2_manifest_paths=v2names, mode="create")
    ds = lance.write_dataset(table(n1, n2, blob), path, mode="append")
    ds.delete("i % 7 = 3")
    ds = lance.dataset(path)
    ds.add_columns({"i2": "i * 2"})
    ds = lance.dataset(path)
    cols = [f.name for f in ds.schema]
    return {"name": f"ds_{fmt}", "path": path, "format": fmt, "v2names": v2names,
            "versions": [v["version"] for v in ds.versions()], "columns": cols,
            "blobs": ["blob"] if blob else []}


def build_blob_v2(out):
    """Blob v2 (2.2+): inline, packed and dedicated sidecar payloads; v2 appends."""
    path = os.path.join(out, "ds_blob_v2")
    sizes = [100, 20000, 100000, 300000, 2_000_000, 6_000_000]

    def tbl(start):
        vals = [os.urandom(s) for s in sizes]
        return pa.table({"id": pa.array(range(start, start + len(vals)), pa.int64()),
                         "blob": lance.blob_array(vals)},
                        schema=pa.schema([pa.field("id", pa.int64()), lance.blob_field("blob")]))
    lance.write_dataset(tbl(0), path, data_storage_version="2.2", mode="create")
    ds = lance.write_dataset(tbl(100), path, mode="append")
    return {"name": "ds_blob_v2", "path": path, "format": "2.2", "v2names": True,
            "versions": [v["version"] for v in ds.versions()], "columns": ["id", "blob"],
            "blobs": ["blob"]}


def main():
    out = sys.argv[1]
    small = "--small" in sys.argv
    n1, n2 = (300, 100) if small else (3000, 1000)
    os.makedirs(out, exist_ok=True)
    for fmt, v2 in (("legacy", False), ("2.0", True), ("2.1", False), ("2.2", True),
                    ("2.3", True)):
        print(json.dumps(build(out, fmt, v2, n1, n2)), flush=True)
    if hasattr(lance, "blob_field"):
        print(json.dumps(build_blob_v2(out)), flush=True)


if __name__ == "__main__":
    main()
