#!/usr/bin/env python3
"""Check `jfsops lance` against what pylance really reads.

usage: check_coverage.py JFSOPS DATASETS.jsonl [--quick]

For each dataset (lines written by make_datasets.py), version and column
selection (and, for blob columns, fetching every payload with take_blobs
against `--blobs`): scan with pylance under strace (strace_reads.py), run
`JFSOPS lance DATASET --version V --columns C --format jsonl`, and require
  * coverage: every byte pylance read in the dataset is inside an emitted
    range (files outside the dataset, e.g. shared libraries, are ignored);
  * tightness: emitted bytes <= 1.1 x observed bytes + emitted metadata
    (ranges made only of metadata: manifest, deletion files, tails).
Exits 1 on any failure, printing one line per case.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from strace_reads import observe  # noqa: E402


def emitted(jfsops, path, version, cols):
    extra = []
    if cols.startswith("blobs:"):
        cols = cols[len("blobs:"):]
        extra = ["--blobs"]
    out = subprocess.run([jfsops, "lance", path, "--version", str(version), "--columns", cols,
                          "--format", "jsonl"] + extra, check=True, capture_output=True, text=True)
    ranges, meta = {}, 0
    for line in out.stdout.splitlines():
        r = json.loads(line)
        if r["type"] != "range":
            continue
        ranges.setdefault(r["file"], []).append((r["offset"], r["offset"] + r["length"]))
        if r["kind"] == "meta":
            meta += r["length"]
    return ranges, meta


def uncovered(obs, em):
    missing = []
    for f, ivs in obs.items():
        have = sorted(em.get(f, []))
        for s, e in ivs:
            cur = s
            for hs, he in have:
                if hs <= cur < he:
                    cur = he
                if cur >= e:
                    break
            if cur < e:
                missing.append((f, s, e, cur))
    return missing


def cases(ds, quick):
    cols = [c for c in ds["columns"]]
    vs = ds["versions"]
    out = []
    for v in vs:
        for combo in (("i", "s"), ("vec", "st", "l", "b", "blob"), ("id", "blob")):
            sel = [c for c in combo if c in cols]
            if len(sel) > 1:
                out.append((v, ",".join(sel)))
    latest = vs[-1]
    singles = cols if not quick else cols[:3]
    for c in singles:
        out.append((latest, c))
    if "st" in cols:
        out.append((latest, "st.x"))
    for b in ds.get("blobs", []):
        # Fetching payloads (take_blobs) is covered by --blobs.
        out.append((vs[0], "blobs:" + b))
        out.append((latest, "blobs:" + b))
    return out


def main():
    jfsops = os.path.abspath(sys.argv[1])
    datasets = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    quick = "--quick" in sys.argv
    py = sys.executable
    fails = 0
    total = 0
    for ds in datasets:
        for v, cols in cases(ds, quick):
            total += 1
            obs = observe(ds["path"], [py, os.path.join(HERE, "scan.py"), ds["path"], str(v), cols])
            # Files a scan opens only to look (the version hint) are not data to warm.
            obs.pop("_versions/latest_version_hint.json", None)
            em, meta = emitted(jfsops, ds["path"], v, cols)
            ob = sum(e - s for ivs in obs.values() for s, e in ivs)
            eb = sum(e - s for ivs in em.values() for s, e in ivs)
            miss = uncovered(obs, em)
            # Payloads of deleted rows are in the data files but not fetched:
            # --blobs lists them (it does not decode deletion vectors), so
            # only coverage is required for payload fetches.
            tight = eb <= 1.1 * ob + meta or cols.startswith("blobs:")
            ok = not miss and tight
            tag = "ok  " if ok else "FAIL"
            print(f"{tag} {ds['name']} v{v} [{cols}]: pylance read {ob} B in {len(obs)} files, "
                  f"emitted {eb} B ({meta} B metadata-only), ratio {eb / max(ob, 1):.3f}",
                  flush=True)
            for f, s, e, cur in miss[:5]:
                print(f"     not covered: {f} [{cur}, {e}) (read [{s}, {e}))")
            if not ok:
                fails += 1
    print(f"{total - fails}/{total} cases passed")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
