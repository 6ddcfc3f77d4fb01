#!/usr/bin/env bash
# jfsops leakcheck on a sqlite3 + file volume with trash 1 day and delayed
# slices: a file appended through a FUSE mount (one slice per append), then
# `juicefs gc --compact` rewrites its chunk and parks the old slices in
# jfs_delslices. Their objects must count as compacted, never as leaked.
# A second mount with --max-deletes 0 removes a file (from the trash too):
# its slices stay pending (refs <= 0) and must count as pending.
export JO_PORT_BASE=${JO_PORT_BASE:-9400}
. "$(dirname "$0")/lib/init.sh" leakcheck
META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_T/objs" lkc --block-size 256K --trash-days 1
jfs_mount "$META" "$JO_T/mnt" --no-bgjob
for i in 1 2 3 4 5; do
	head -c 300000 /dev/urandom >>"$JO_T/mnt/frag"   # each close commits a slice
done
head -c 700000 /dev/urandom >"$JO_T/mnt/gone"
jfs_umount "$JO_T/mnt"
# remove "gone" for good: through the trash, with slice deletion disabled
jfs_mount "$META" "$JO_T/mnt" --no-bgjob --max-deletes 0
rm -f "$JO_T/mnt/gone"
rm -rf "$JO_T/mnt/.trash/"*/* 2>/dev/null || true
jfs_umount "$JO_T/mnt"
"$JUICEFS" gc --no-agent --compact "$META" >"$JO_T/compact.log" 2>&1 || { jo_tail "$JO_T/compact.log"; jo_die "gc --compact failed"; }
n=$(sqlite3 "$JO_T/meta.db" 'select count(*) from jfs_delslices')
[ "$n" -gt 0 ] || jo_die "no delayed slices were made (compaction did not happen)"
lk_run_variant "$META" "file:$JO_T/objs"
compacted=$("$JO_VENV/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["compacted"])' "$LK_DIR/summary.json")
[ "$compacted" -gt 0 ] || { echo "FAIL: no compacted objects counted" >&2; exit 1; }
pending=$("$JO_VENV/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pending"])' "$LK_DIR/summary.json")
echo "delayed slices: $n rows, $compacted compacted objects, $pending pending objects" >&2
[ "$pending" -gt 0 ] || { echo "FAIL: no pending-delete objects counted" >&2; exit 1; }
