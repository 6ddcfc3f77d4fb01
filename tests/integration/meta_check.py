#!/usr/bin/env python3
"""Compare tests/tools/meta_dump output (our common/meta) with `juicefs dump` JSON.

usage: meta_check.py OURS.json DUMP.json [--expect-refs ID:N ...] [--expect-delfiles]
       [--expect-sustained] [--expect-secret]
Exits 1 with a list of mismatches."""
import json
import sys

TYPES = {"regular": 1, "directory": 2, "symlink": 3, "fifo": 4,
         "blockdev": 5, "chardev": 6, "socket": 7}
errors = []


def err(msg):
    errors.append(msg)


def main():
    ours = json.load(open(sys.argv[1]))
    dump = json.load(open(sys.argv[2]))
    opts = sys.argv[3:]
    st = dump["Setting"]
    f = ours["format"]
    for k_o, k_d in (("name", "Name"), ("uuid", "UUID"), ("storage", "Storage"),
                     ("bucket", "Bucket"), ("trash_days", "TrashDays"),
                     ("block_size_kib", "BlockSize")):
        if f[k_o] != st.get(k_d):
            err(f"format {k_o}: ours {f[k_o]!r} dump {st.get(k_d)!r}")
    if "--expect-secret" in opts and not (f["key_encrypted"] and f["secret_matches"]):
        err("SecretKey was not decrypted to the expected value")

    c, dc = ours["counters"], dump["Counters"]
    for k_o, k_d in (("nextInode", "nextInodes"), ("nextChunk", "nextChunk"),
                     ("nextSession", "nextSession"), ("usedSpace", "usedSpace"),
                     ("totalInodes", "usedInodes"), ("nextTrash", "nextTrash")):
        if c[k_o] != dc.get(k_d):
            err(f"counter {k_o}: ours {c[k_o]} dump {dc.get(k_d)}")

    files = {x["path"]: x for x in ours["files"]}
    seen = set()

    def cmp_attr(path, a, da):
        if a["type"] != TYPES[da["type"]]:
            err(f"{path}: type {a['type']} vs {da['type']}")
        for k in ("mode", "uid", "gid", "atime", "mtime", "ctime", "atimensec",
                  "mtimensec", "ctimensec", "nlink", "length"):
            if k == "length" and da["type"] == "directory":
                continue  # dump prints 0 for directories
            if k in da and a[k] != da[k]:
                err(f"{path}: {k} ours {a[k]} dump {da[k]}")

    def walk(node, path):
        for name, child in node.get("entries", {}).items():
            p = path + "/" + name
            seen.add(p)
            o = files.get(p)
            da = child["attr"]
            if o is None:
                err(f"{p}: missing in ours")
                continue
            if o["ino"] != da["inode"] or o["resolved"] != da["inode"]:
                err(f"{p}: inode ours {o['ino']}/{o['resolved']} dump {da['inode']}")
            if o["dtype"] != TYPES[da["type"]]:
                err(f"{p}: entry type {o['dtype']} vs {da['type']}")
            cmp_attr(p, o["attr"], da)
            sc = ours["inodes"].get(str(da["inode"]))
            if sc is None or (da["type"] != "directory" and sc["length"] != da["length"]):
                err(f"{p}: scan_inodes missing or wrong length")
            dch = [{"index": ch["index"],
                    "slices": [{k: s.get(k, 0) for k in ("pos", "id", "size", "off", "len")}
                               for s in ch["slices"]]}
                   for ch in child.get("chunks", [])]
            if da["type"] == "regular" and dch != o["chunks"]:
                err(f"{p}: chunks ours {o['chunks']} dump {dch}")
            below = [ch["index"] for ch in dch if ch["index"] * (64 << 20) < da["length"]]
            if da["type"] == "regular" and o["chunks_len"] != below:
                err(f"{p}: list_chunks_len {o['chunks_len']} want {below}")
            if da["type"] == "directory":
                walk(child, p)

    cmp_attr("/", ours["root"], dump["FSTree"]["attr"])
    walk(dump["FSTree"], "")
    for p in files:
        if p not in seen and not p.startswith("/.trash"):
            err(f"{p}: in ours but not in dump")

    # every live file's chunks appear in scan_chunks with identical records
    allc = {(x["ino"], x["index"]): x["slices"] for x in ours["all_chunks"]}
    if len(allc) != len(ours["all_chunks"]):
        err("scan_chunks returned a chunk twice")
    for o in ours["files"]:
        for ch in o["chunks"]:
            if allc.get((o["ino"], ch["index"])) != ch["slices"]:
                err(f"{o['path']}: scan_chunks differs from read_chunk for index {ch['index']}")

    # reference counts: records + delayed entries = refs
    want = {}
    for slices in allc.values():
        for s in slices:
            if s["id"]:
                want[(s["id"], s["size"])] = want.get((s["id"], s["size"]), 0) + 1
    for d in ours["delslices"]:
        for i, size in d["slices"]:
            want[(i, size)] = want.get((i, size), 0) + 1
    for g in ours["get_slice_ref"]:
        k = (g["id"], g["size"])
        if g["refs"] != want[k]:
            err(f"get_slice_ref {k}: {g['refs']} want {want[k]}")
    for x in ours["all_chunks"]:  # get_slice_ref called from inside scan_chunks
        for s, r in zip(x["slices"], x["refs_in_scan"]):
            if s["id"] and r != want[(s["id"], s["size"])]:
                err(f"refs_in_scan {s['id']}: {r} want {want[(s['id'], s['size'])]}")
    scanned = {(r["id"], r["size"]): r["refs"] for r in ours["slice_refs"]}
    for k, n in want.items():
        if k in scanned and scanned[k] != n:
            err(f"scan_slice_refs {k}: {scanned[k]} want {n}")
        if ours["engine"] == "sqlite3" and k not in scanned:
            err(f"scan_slice_refs: sqlite slice {k} has no row")
        if ours["engine"] == "redis" and n > 1 and k not in scanned:
            err(f"scan_slice_refs: redis slice {k} with {n} refs has no field")
    for o in opts:
        if o.startswith("--expect-refs="):
            for item in o.split("=", 1)[1].split(","):
                path, n = item.split(":")
                fo = files[path]
                s = fo["chunks"][0]["slices"][0]
                if want.get((s["id"], s["size"])) != int(n):
                    err(f"{path}: expected slice refs {n}, got {want.get((s['id'], s['size']))}")

    # pending deletions
    ddf = sorted((d["inode"], d["length"], d["expire"]) for d in dump.get("DelFiles", []))
    odf = sorted((d["ino"], d["length"], d["deleted_at"]) for d in ours["delfiles"])
    if ddf != odf:
        err(f"delfiles ours {odf} dump {ddf}")
    if "--expect-delfiles" in opts and not odf:
        err("expected pending delfiles, found none")
    dsus = sorted((s["sid"], i) for s in dump.get("Sustained", []) for i in s["inodes"])
    osus = sorted(tuple(x) for x in ours["sustained"])
    if dsus != osus:
        err(f"sustained ours {osus} dump {dsus}")
    if "--expect-sustained" in opts:
        if not osus:
            err("expected sustained inodes, found none")
        sids = {s["sid"] for s in ours["sessions"]}
        for sid, _ in osus:
            if sid not in sids:
                err(f"session {sid} of a sustained inode not in scan_sessions")
        for s in ours["sessions"]:
            if "MountPoint" not in s["info"]:
                err(f"session {s['sid']} info is not SessionInfo JSON: {s['info'][:80]}")

    multi = [o["path"] for o in ours["files"] if len(o["chunks"]) > 1]
    if not multi:
        err("no file with several chunks was checked")
    for o in opts:
        if o.startswith("--expect-delslices="):
            fo = files[o.split("=", 1)[1]]
            recs = fo["chunks"][0]["slices"]
            ids = {s["id"] for s in recs}
            ds = [d for d in ours["delslices"] if d["id"] in ids]
            if len(recs) != 1 or not ds:
                err(f"{fo['path']}: expected one compacted record and a delslices entry, "
                    f"got {recs} / {ours['delslices']}")
            for d in ds:
                if len(d["slices"]) < 2 or any(i == 0 or i in ids for i, _ in d["slices"]):
                    err(f"delslices {d['id']}: unexpected slices {d['slices']}")
                if abs(d["deleted_at"] - ours["now"]) > 600:
                    err(f"delslices {d['id']}: timestamp {d['deleted_at']} is not recent")
    n_files = sum(1 for o in ours["files"] if o["attr"]["type"] == 1)
    n_recs = sum(len(v) for v in allc.values())
    print(f"meta_check: {ours['engine']}: {len(files)} entries ({n_files} files), "
          f"{len(allc)} chunks, {n_recs} records, {len(scanned)} explicit refs, "
          f"{len(odf)} delfiles, {len(ours['delslices'])} delslices, {len(osus)} sustained, "
          f"{len(ours['sessions'])} sessions")
    if errors:
        for e in errors:
            print("MISMATCH:", e)
        sys.exit(1)
    print("meta_check: OK")


main()
