#!/usr/bin/env bash
# A chunk a live client rewrites while jfsops leakcheck scans an etcd volume
# is read as it was when the scan began (one revision: a true snapshot), so
# the blocks of its old slices are never reported leaked. juicefs's own etcd
# scans filter by max_mod_revision and skip keys modified mid-scan (spec
# B.3): on the same interleaving `juicefs gc` is run too and what it counts is
# printed beside (not asserted: its window depends on timing).
#
# The interleaving is made, not hoped for: the 'A' range is padded with
# 150,000 inert keys (no JuiceFS kind) so that the reference scan takes
# seconds; leakcheck is stopped (SIGSTOP) one second in, a mount appends to
# the file (its chunk key changes), and leakcheck is continued.
. "$(dirname "$0")/lib/init.sh" engines
KV="$JO_VENV/bin/python $JO_REPO/tests/tools/kvmeta.py"
engine_start etcd
engine_meta etcd snap
META=$JO_META
B=$JO_T/bucket
jfs_format "$META" "$B" snap --trash-days 0 --block-size 1M
MP=$JO_T/mnt
jfs_mount "$META" "$MP" --no-bgjob
python3 - "$MP/f" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY)
for i in range(4):          # four slices in chunk 0
    os.pwrite(fd, os.urandom(300000), i * 300000)
    os.fsync(fd)
os.close(fd)
PY
sync
find "$B/snap/chunks" -type f -exec touch -d '3 hours ago' {} +
$KV pad "$META" 150000

# interleave WHAT OUT CMD...: start CMD (stdout to OUT, stderr to OUT.err),
# stop it 1 s in, append to the file through the mount, continue it; RC := its exit code
interleave() {
	local what=$1 out=$2 pid
	shift 2
	RC=0
	"$@" >"$out" 2>"$out.err" &
	pid=$!
	sleep 1
	kill -0 "$pid" 2>/dev/null || jo_die "$what finished before the append: the scan was not slowed down"
	kill -STOP "$pid"
	dd if=/dev/urandom of="$MP/f" bs=100000 count=1 seek=12 conv=notrunc status=none
	sync
	sleep 1
	kill -CONT "$pid"
	wait "$pid" || RC=$?
}

interleave leakcheck "$JO_T/lk.json" "$JO_BIN" leakcheck "$META" --json --out "$JO_T/leaks.jsonl"
[ "$RC" = 0 ] || { cat "$JO_T/lk.json.err" "$JO_T/lk.json" "$JO_T/leaks.jsonl" >&2; jo_die "leakcheck exit $RC: the rewritten chunk's blocks were taken for leaks"; }
leaked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["leaked"])' "$JO_T/lk.json")
[ "$leaked" = 0 ] || jo_die "leakcheck reports $leaked leaked objects"
valid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["valid"])' "$JO_T/lk.json")
[ "$valid" -ge 4 ] || jo_die "leakcheck saw $valid valid objects, expected the 4 old slices' blocks"
echo "jfsops leakcheck with a chunk rewritten mid-scan: 0 leaked, $valid valid" >&2

interleave "juicefs gc" "$JO_T/gc.log" env JFS_GC_SKIPPEDTIME=0 "$JUICEFS" gc --no-agent "$META"
echo "juicefs gc on the same interleaving: $(grep -o 'scanned.*leaked ([0-9]* bytes)' "$JO_T/gc.log.err" | tail -n 1)" >&2

$KV unpad "$META"
jfs_umount "$MP"
"$JUICEFS" fsck --no-agent "$META" >"$JO_T/fsck.log" 2>&1 || { tail "$JO_T/fsck.log"; jo_die "juicefs fsck failed"; }
echo "etcd_scan_snapshot: ok"
