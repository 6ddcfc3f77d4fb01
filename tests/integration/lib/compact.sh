# shellcheck shell=bash
# Shared body of the compaction integration tests: a volume made by the real
# juicefs, files fragmented through a FUSE mount (100+ records per chunk,
# truncation, holes) with a byte-identical local mirror, then
# `jfsops compact --apply` while a client holds a file open; checks through a
# fresh mount, juicefs fsck and juicefs gc. Needs services.sh sourced and
# jo_setup done.
#
# A JuiceFS 1.4 client compacts a chunk itself when a write makes its list
# 99 records long (n % 100 == 99), so a mount cannot build lists of 100+
# records; the files here stay just below that (about 90 records a chunk).

FRAG=$JO_REPO/tests/tools/fragment.py
# shellcheck source=gc.sh
. "$JO_REPO/tests/integration/lib/gc.sh"   # gc_age_delslices

jo_sha() { sha256sum "$1" | cut -d' ' -f1; }

# compact_expect_same DIR_MOUNT DIR_MIRROR: every mirrored file reads back the same.
compact_expect_same() {
	local mp=$1 mir=$2 f
	for f in "$mir"/*; do
		[ "$(jo_sha "$mp/${f##*/}")" = "$(jo_sha "$f")" ] ||
			jo_die "${f##*/}: content through the mount differs from the mirror"
	done
}

# compact_fsck META: juicefs fsck finds nothing lost.
compact_fsck() {
	local out
	out=$("$JUICEFS" fsck "$1" --no-agent 2>&1) || { echo "$out" | tail -n 20 >&2; jo_die "juicefs fsck failed"; }
}

# compact_gc_line META: the summary line of a dry `juicefs gc` (no age window).
compact_gc_line() {
	JFS_GC_SKIPPEDTIME=0 "$JUICEFS" gc "$1" --no-agent 2>&1 | grep 'scanned' | sed 's/.*<INFO>: //'
}

# compact_max_records META: the largest number of records in any chunk.
compact_max_records() {
	"$JO_BIN" info "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_records_per_chunk"])'
}

# compact_run_variant META BUCKET NAME TRASH_DAYS [juicefs format flags...]
compact_run_variant() {
	local meta=$1 bucket=$2 name=$3 trash=$4
	shift 4
	jfs_format "$meta" "$bucket" "$name" --trash-days "$trash" "$@"
	local mp=$JO_T/mnt-$name mir=$JO_T/mirror-$name
	mkdir -p "$mir"
	jfs_mount "$meta" "$mp" --no-bgjob
	python3 "$FRAG" "$mp/a" "$mir/a" 1 93 $((3 << 20))
	python3 "$FRAG" "$mp/b" "$mir/b" 2 90 $((5 << 20))
	python3 "$FRAG" "$mp/c" "$mir/c" 3 60 $((700 << 10))
	# a file whose data starts in chunk 1 (a 64 MiB hole in front)
	python3 - "$mp/d" "$mir/d" <<'PY'
import os, random, sys
r = random.Random(4)
fds = [os.open(p, os.O_CREAT | os.O_RDWR) for p in sys.argv[1:3]]
for i in range(40):
    data = r.randbytes(r.randrange(1, 200000)); off = (64 << 20) + r.randrange(0, 1 << 20)
    for fd in fds: os.pwrite(fd, data, off)
    os.fsync(fds[0])
for fd in fds: os.close(fd)
PY
	local before
	before=$(compact_max_records "$meta")
	[ "$before" -ge 90 ] || jo_die "$name: expected a chunk with 90+ records, the most is $before"

	# a reader opens a file before the compaction, reads during and after it
	local ready=$JO_T/reader-$name
	python3 - "$mp/a" "$ready" <<'PY' &
import hashlib, os, sys, time
f = open(sys.argv[1], "rb")
open(sys.argv[2] + ".open", "w").close()
def sha():
    f.seek(0); return hashlib.sha256(f.read()).hexdigest()
while not os.path.exists(sys.argv[2] + ".go1"): time.sleep(0.05)
open(sys.argv[2] + ".during", "w").write(sha())
while not os.path.exists(sys.argv[2] + ".go2"): time.sleep(0.05)
open(sys.argv[2] + ".after", "w").write(sha())
PY
	local rpid=$!
	JO_KILL_PIDS+=("$rpid")
	while [ ! -e "$ready.open" ]; do
		kill -0 $rpid 2>/dev/null || jo_die "$name: the reader could not open the file"
		sleep 0.05
	done

	"$JO_BIN" compact "$meta" >"$JO_T/report-$name.txt" ||
		jo_die "$name: jfsops compact (report) failed"
	grep -q 'dry run: nothing changed' "$JO_T/report-$name.txt" || jo_die "$name: report is not a dry run"
	[ "$(compact_max_records "$meta")" = "$before" ] || jo_die "$name: the report changed the volume"
	# the report names the most fragmented chunks: the path of each (its inode
	# as the mount stats it), most records first, the first the volume's most
	"$JO_BIN" compact "$meta" --json --top 3 >"$JO_T/report-$name.json" ||
		jo_die "$name: jfsops compact --json --top 3 failed"
	python3 - "$JO_T/report-$name.json" "$mp" "$before" <<'PY' || jo_die "$name: the report does not name the most fragmented files right"
import json, os, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
top = [l for l in lines if l["type"] == "fragmented"]
assert lines[-1]["type"] == "summary" and len(top) == 3, lines
assert top[0]["records"] == int(sys.argv[3]), (top[0], sys.argv[3])
assert [t["records"] for t in top] == sorted((t["records"] for t in top), reverse=True), top
for t in top:
    assert t["path"] in ("/a", "/b", "/c", "/d"), t
    assert os.stat(sys.argv[2] + t["path"]).st_ino == t["inode"], t
    assert t["chunk"] == (1 if t["path"] == "/d" else 0) and 0 < t["hidden_bytes"] < t["written_bytes"], t
print("report: top 3 %s" % ", ".join("%s#%d (%d records)" % (t["path"], t["chunk"], t["records"]) for t in top), file=sys.stderr)
PY
	grep -Eq "^ +$before +[0-9.]+ MiB +[0-9.]+ MiB +0  /[abc]\$" "$JO_T/report-$name.txt" ||
		jo_die "$name: the human report does not name the most fragmented file: $(cat "$JO_T/report-$name.txt")"

	"$JO_BIN" compact "$meta" --apply --threads 4 --json >"$JO_T/apply-$name.json" &
	local cpid=$!
	touch "$ready.go1"
	wait $cpid || jo_die "$name: jfsops compact --apply failed: $(tail -n 3 "$JO_T/apply-$name.json")"
	touch "$ready.go2"
	wait $rpid || jo_die "$name: the reader failed"
	[ "$(cat "$ready.during")" = "$(jo_sha "$mir/a")" ] || jo_die "$name: reader saw wrong bytes during compaction"
	[ "$(cat "$ready.after")" = "$(jo_sha "$mir/a")" ] || jo_die "$name: reader saw wrong bytes after compaction"
	python3 - "$JO_T/apply-$name.json" <<'PY' || jo_die "$name: compaction summary is wrong"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert s["type"] == "summary" and not s["dry_run"], s
# a live client may compact a chunk first (our reader, or its own write path,
# triggers that): then it is no candidate, or our attempt conflicts and the
# retry finds nothing left to do
assert s["failed"] == 0 and s["gave_up"] == 0, s
assert s["compacted"] >= 2 and s["compacted"] + s["skipped"] == s["candidates"] >= 3, s
print("compacted %d chunks, %d conflicts, %d records removed" % (s["compacted"], s["conflicts"], s["records_removed"]), file=sys.stderr)
PY
	# every chunk is one record, or a kept big slice plus one
	local after
	after=$(compact_max_records "$meta")
	[ "$after" -le 2 ] || jo_die "$name: a chunk still holds $after records after compaction"

	jfs_umount "$mp"
	jfs_mount "$meta" "$mp" --no-bgjob
	compact_expect_same "$mp" "$mir"
	compact_fsck "$meta"
	local gcline
	gcline=$(compact_gc_line "$meta")
	echo "$name: juicefs gc: $gcline" >&2
	case $gcline in *" 0 leaked "*) ;; *) jo_die "$name: juicefs gc finds leaked objects: $gcline" ;; esac
	if [ "$trash" = 0 ]; then
		# old slices left at once: nothing pending, nothing delayed
		case $gcline in *" 0 pending delete "*" 0 compacted "*) ;;
		*) jo_die "$name: old slices were not freed: $gcline" ;; esac
	else
		case $gcline in *" 0 compacted "*) jo_die "$name: no delayed slices with trash on: $gcline" ;; esac
	fi

	# a live writer appending and overwriting while compactions run
	python3 "$FRAG" "$mp/w" "$mir/w" 5 0 0 --append-loop 6 &
	local wpid=$! conflicts=0 n
	JO_KILL_PIDS+=("$wpid")
	for n in 1 2 3 4; do
		sleep 1
		"$JO_BIN" compact "$meta" --apply --min-slices 3 --json >"$JO_T/live-$name-$n.json" ||
			jo_die "$name: compaction beside a writer failed"
	done
	wait $wpid || jo_die "$name: the writer failed"
	conflicts=$(python3 -c 'import json,sys; print(sum(json.loads(open(f).readlines()[-1])["conflicts"] for f in sys.argv[1:]))' "$JO_T"/live-"$name"-*.json)
	echo "$name: compaction beside a live writer: $conflicts conflicts" >&2
	jfs_umount "$mp"
	jfs_mount "$meta" "$mp" --no-bgjob
	compact_expect_same "$mp" "$mir"

	# killed mid-upload / mid-commit: no data loss, reruns complete
	python3 "$FRAG" "$mp/k" "$mir/k" 6 90 $((6 << 20))
	python3 "$FRAG" "$mp/l" "$mir/l" 7 90 $((6 << 20))
	local delay
	for delay in 0.05 0.1 0.2 0.3 0.5 0.8; do
		timeout -s KILL "$delay" "$JO_BIN" compact "$meta" --apply --threads 2 --lease 2s \
			--task-size 1 >/dev/null 2>&1 || true
	done
	# tasks leased by the killed workers become claimable when their leases expire
	sleep 2.5
	"$JO_BIN" compact "$meta" --apply --audit "$JO_T/audit-$name.jsonl" >/dev/null ||
		jo_die "$name: compaction after kills failed"
	"$JO_BIN" compact "$meta" --status | grep -q '^compaction tasks: 0 recorded' ||
		jo_die "$name: tasks left behind: $("$JO_BIN" compact "$meta" --status)"
	[ "$(compact_max_records "$meta")" -le 2 ] || jo_die "$name: chunks left uncompacted after kills"
	jfs_umount "$mp"
	jfs_mount "$meta" "$mp" --no-bgjob
	compact_expect_same "$mp" "$mir"
	compact_fsck "$meta"
	echo "$name: after kills, juicefs gc: $(compact_gc_line "$meta")" >&2

	# the whole cycle: old slices leave through jfsops gc (delayed ones once
	# TrashDays have passed), and jfsops leakcheck agrees with juicefs gc on
	# what a killed compaction left behind
	[ "$trash" = 0 ] || gc_age_delslices "$meta" $((2 * 86400))
	"$JO_BIN" gc "$meta" --delete --threads 2 >"$JO_T/gc-$name.txt" 2>&1 ||
		jo_die "$name: jfsops gc --delete failed: $(tail -n 5 "$JO_T/gc-$name.txt")"
	gcline=$(compact_gc_line "$meta")
	case $gcline in *" 0 pending delete "*" 0 compacted "*) ;;
	*) jo_die "$name: compacted-away slices remain after jfsops gc: $gcline" ;; esac
	local jl ol rc=0
	jl=$(echo "$gcline" | grep -o '[0-9]* leaked' | cut -d' ' -f1)
	"$JO_BIN" leakcheck "$meta" --min-age 0s --out "$JO_T/leaks-$name.jsonl" --json \
		>"$JO_T/leaks-$name.json" 2>/dev/null || rc=$?
	# juicefs gc counts a killed writer's ".jfs.*.tmp.*" files as leaked;
	# leakcheck reports them as foreign (and never deletes them)
	ol=$(python3 -c 'import json,sys; s = json.load(open(sys.argv[1])); print(s["leaked"] + s["foreign"])' "$JO_T/leaks-$name.json")
	echo "$name: orphans of killed compactions: jfsops leakcheck $ol (leaked + foreign), juicefs gc $jl" >&2
	if [ "$ol" != "$jl" ]; then
		echo "--- juicefs gc -v leaked objects:" >&2
		JFS_GC_SKIPPEDTIME=0 "$JUICEFS" gc "$meta" --no-agent -v 2>&1 | grep 'leaked object' >&2 || true
		echo "--- jfsops leakcheck report and summary:" >&2
		cat "$JO_T/leaks-$name.jsonl" "$JO_T/leaks-$name.json" >&2 || true
		jo_die "$name: leakcheck finds $ol leaked objects, juicefs gc $jl"
	fi
	if grep -q '"type":"leaked"' "$JO_T/leaks-$name.jsonl"; then
		[ $rc = 1 ] || jo_die "$name: leakcheck found leaks but exited $rc"
		"$JO_BIN" leakcheck "$meta" --delete-from "$JO_T/leaks-$name.jsonl" --min-age 0s \
			--audit "$JO_T/leak-audit-$name.jsonl" >/dev/null 2>&1 ||
			jo_die "$name: leakcheck --delete-from failed"
	fi
	# what is left for juicefs gc is exactly the foreign files leakcheck reported
	local nforeign
	nforeign=$(grep -c '"type":"foreign"' "$JO_T/leaks-$name.jsonl" || true)
	gcline=$(compact_gc_line "$meta")
	case $gcline in *" $nforeign leaked "*) ;; *) jo_die "$name: leaks remain: $gcline (foreign: $nforeign)" ;; esac
	jfs_umount "$mp"
	jfs_mount "$meta" "$mp" --no-bgjob
	compact_expect_same "$mp" "$mir"
	compact_fsck "$meta"
	jfs_umount "$mp"
}
