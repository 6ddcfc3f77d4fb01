#!/bin/bash
# warmup_lance.sh: the issue's check with a real Lance dataset. pylance writes
# a wide table (two small columns, two large ones) into a JuiceFS volume
# through a mount; `jfsops lance` lists the ranges of the two small columns
# (read from the metadata, no mount); `jfsops warmup --mount` warms them on a
# fresh cache; a remount on the same cache directory scanning those columns
# with pylance fetches no object, and the bytes warmed are compared with
# `juicefs warmup` of the same files on another fresh cache.
#
# Env as warmup_redis_s3.sh (JFSOPS_BIN needs both the lance and the warmup
# commands).
export JO_PORT_BASE=${JO_PORT_BASE:-9640}
. "$(dirname "$0")/lib/init.sh"
PY=$JO_VENV/bin/python
# shellcheck source=warmup_lib.bash
. "$here/warmup_lib.bash"
"$PY" -c "import lance" 2>/dev/null || fail "pylance is not installed in $JO_VENV"

MP=$JO_T/mnt
mount_at "$MP" "$JO_T/cache-w"
"$PY" - "$MP/ds" <<'EOF'
import os, sys
import pyarrow as pa
import lance
n = 6000
t = pa.table({
    "id": pa.array(range(n), pa.int64()),
    "f": pa.array([x * 0.5 for x in range(n)], pa.float32()),
    "payload": pa.array([os.urandom(2048) for _ in range(n)], pa.binary()),
    "vec": pa.FixedSizeListArray.from_arrays(
        pa.array([float(x % 97) for x in range(n * 64)], pa.float32()), 64),
})
lance.write_dataset(t, sys.argv[1], max_rows_per_file=3000)
ds = lance.write_dataset(t, sys.argv[1], mode="append")
print(ds.version)
EOF
jfs_umount "$MP"

"$JO_BIN" lance "$META:/ds" --columns id,f --format jsonl >"$JO_T/ranges.jsonl" ||
	fail "jfsops lance failed"
"$JO_BIN" lance "$META:/ds" --columns id,f --format ranges --prefix "$MP/ds" >"$JO_T/ranges.jfs"
"$JO_BIN" lance "$META:/ds" --columns id,f --format juicefs --prefix "$MP/ds" >"$JO_T/ranges.paths"
nfiles=$(grep -c '"type":"range"' "$JO_T/ranges.jsonl")
[ "$nfiles" -ge 5 ] || fail "expected ranges in 4 data files + the manifest, got $nfiles"

# the jsonl list (relative paths + --prefix) and the juicefs list (mount
# paths) name the same blocks
"$JO_BIN" warmup "$META" --prefix /ds --ranges "$JO_T/ranges.jsonl" --dry-run |
	grep $'\t' | sort >"$JO_T/b1"
"$JO_BIN" warmup "$META" --mount "$MP" --ranges "$JO_T/ranges.jfs" --dry-run |
	grep $'\t' | sort >"$JO_T/b2"
[ -s "$JO_T/b1" ] || fail "no blocks listed"
diff "$JO_T/b1" "$JO_T/b2" || fail "jsonl and ranges-format lists give different blocks"

C1=$JO_T/cache-1
mount_at "$MP" "$C1"
b0=$(getbytes "$MP")
"$JO_BIN" warmup "$META" --prefix /ds --ranges "$JO_T/ranges.jsonl" --mount "$MP" --json \
	>"$JO_T/warm.jsonl" || { cat "$JO_T/warm.jsonl" >&2; fail "warmup exit $?"; }
sleep 1
ours=$(($(getbytes "$MP") - b0))
"$PY" -c "import json,sys
s=[json.loads(l) for l in open(sys.argv[1])][-1]
print('warmup: %d ranges -> %d blocks (%d bytes), warmed %d, failed %d; mount GETs %d (%d bytes)' %
      (s['ranges'], s['blocks'], s['bytes'], s['warmed'], s['failed'], s['mount_gets'],
       s['mount_get_bytes']))" "$JO_T/warm.jsonl" >&2
jfs_umount "$MP"

# remount on the same cache, no readahead by the client: pylance scanning
# the two columns must not fetch anything
mount_at "$MP" "$C1" --prefetch 0 --max-readahead 0
sleep 2
g0=$(gets "$MP")
rows=$("$PY" "$JO_REPO/tests/lance/scan.py" "$MP/ds" 2 id,f)
[ "$rows" = 12000 ] || fail "scan returned $rows rows"
sleep 1
g1=$(gets "$MP")
[ $((g1 - g0)) = 0 ] || fail "pylance scan after warmup fetched $((g1 - g0)) objects"
jfs_umount "$MP"

C2=$JO_T/cache-2
mount_at "$MP" "$C2"
b0=$(getbytes "$MP")
mapfile -t files < <("$PY" -c "import json,sys
seen=[]
for l in open(sys.argv[1]):
    o=json.loads(l)
    if o.get('type')=='range' and o['file'] not in seen: seen.append(o['file'])
print('\n'.join(seen))" "$JO_T/ranges.jsonl")
# --format juicefs is the list the real `juicefs warmup -f` reads: the files
# of the ranges, each once, whole
[ "$(printf '%s\n' "${files[@]/#/$MP/ds/}")" = "$(cat "$JO_T/ranges.paths")" ] ||
	fail "--format juicefs does not list the files of the ranges, each once"
"$JUICEFS" warmup --no-agent -f "$JO_T/ranges.paths" >"$JO_T/jwarm.log" 2>&1 ||
	{ cat "$JO_T/jwarm.log" >&2; fail "juicefs warmup -f (the --format juicefs list) failed"; }
grep -Eq "${#files[@]} files" "$JO_T/jwarm.log" ||
	{ cat "$JO_T/jwarm.log" >&2; fail "juicefs warmup -f did not warm the ${#files[@]} listed files"; }
sleep 1
theirs=$(($(getbytes "$MP") - b0))
jfs_umount "$MP"
jo_log "two columns of a Lance dataset: jfsops warmup fetched $ours bytes, juicefs warmup" \
	"$theirs bytes ($(awk -v a=$ours -v b=$theirs 'BEGIN { printf "%.1f%%", 100 * a / b }'))"
[ "$ours" -gt 0 ] && [ $((ours * 2)) -lt "$theirs" ] || fail "not a small fraction"
echo "PASS warmup_lance"
