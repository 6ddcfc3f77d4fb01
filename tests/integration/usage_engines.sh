#!/usr/bin/env bash
# jfsops usage on every engine of JO_ENGINES (default: redis sqlite3 postgres
# mysql etcd), on a tree made through a real juicefs mount: nested
# directories, a chain 14 deep, a directory of 300 files, empty files,
# symlinks, a hard link, UTF-8 and space in names, files with set access and
# modification ages, a file in the trash. Checks:
#  - every directory equals `juicefs summary --strict --csv` (size, dirs, files)
#  - every directory's bytes, files, cold bytes and age buckets equal a walk
#    of the mount (usage_check.py tree), the trash bytes its .trash
#  - a second report with --since after writes, deletes and a rename: the
#    growth of every directory, and the new totals against the mount again
#  - a report of a subtree (PATH argument)
#  - a live writer renaming files in and out of a directory during the walk:
#    the walk succeeds, and on engines with snapshots the totals are exact
#  - a file removed while the mount holds it open is reported apart
. "$(dirname "$0")/lib/init.sh" engines
JO_ENGINES=${JO_ENGINES:-redis sqlite3 postgres mysql etcd}
CHECK="python3 $here/usage_check.py"
BUCKETS=1d,7d,30d,90d,1y
now=$(date +%s)

# set_age FILE MTIME_AGE_S ATIME_AGE_S
set_age() {
	touch -h -m -d "@$((now - $2))" "$1"
	touch -h -a -d "@$((now - $3))" "$1"
}

make_tree() {
	local m=$1 i d
	mkdir -p "$m/data/raw" "$m/data/clean" "$m/logs/2024" "$m/logs/2025" "$m/empty" \
		"$m/with space/é ü" "$m/many"
	jo_random_files "$m" data/raw/a.bin:1000000 data/raw/b.bin:300000 data/clean/c.csv:12345
	: >"$m/data/clean/zero"
	jo_random_files "$m" logs/2024/old.log:7000 logs/2025/new.log:9000
	head -c 4097 /dev/urandom >"$m/with space/é ü/f ile"
	ln -s ../raw/a.bin "$m/data/clean/link"
	ln "$m/data/raw/b.bin" "$m/logs/hard.bin"
	for i in $(seq 1 300); do printf '%0*d' $((i % 50)) 0 >"$m/many/f$i"; done
	d=$m/deep
	for i in $(seq 1 14); do d=$d/d$i; done
	mkdir -p "$d"
	head -c 5555 /dev/urandom >"$d/bottom"
	# ages away from the bucket edges: 2h, 3d, 20d, 60d, 200d, 800d
	set_age "$m/data/raw/a.bin" $((200 * 86400)) $((200 * 86400))
	set_age "$m/data/raw/b.bin" $((60 * 86400)) $((3 * 86400))
	set_age "$m/data/clean/c.csv" $((20 * 86400)) $((20 * 86400))
	set_age "$m/logs/2024/old.log" $((800 * 86400)) $((800 * 86400))
	set_age "$m/logs/2025/new.log" 7200 7200
	set_age "$d/bottom" $((100 * 86400)) $((3 * 86400))
	# into the trash (trash days 1)
	head -c 2222 /dev/urandom >"$m/gone.txt"
	rm "$m/gone.txt"
}

run_usage() { # META OUT [args]
	local meta=$1 out=$2
	shift 2
	"$JO_BIN" usage "$meta" --json "$@" >"$out" 2>"$out.err" ||
		{ cat "$out.err" >&2; jo_die "jfsops usage $* failed"; }
}

for e in $(engine_list); do
	mnt=$JO_T/mnt-$e
	engine_volume "$e" "us-$e" "$mnt"
	make_tree "$mnt"
	sync

	r1=$JO_T/$e-r1.json
	run_usage "$meta" "$r1" --depth 10 --top 5
	"$JUICEFS" summary --no-agent --strict --csv --depth 10 --entries 100 "$mnt" >"$JO_T/$e-s1.csv" \
		2>"$JO_T/$e-s1.err" || jo_die "$e: juicefs summary failed"
	$CHECK summary "$JO_T/$e-s1.csv" "$r1" || jo_die "$e: report differs from juicefs summary"
	$CHECK tree "$mnt" "$r1" "$BUCKETS" 90d || jo_die "$e: report differs from the mount"
	python3 - "$r1" "$e" <<'EOF' || jo_die "$e: report fields"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
s = recs[-1]
assert s["type"] == "summary", s
assert s["point_in_time"] == (not sys.argv[2].startswith("redis")), s["point_in_time"]
assert s["access_times_seen"] is False and "modification ages" in s["note"], s["note"]
assert s["trash_files"] == 1 and s["trash_bytes"] == 2222, (s["trash_files"], s["trash_bytes"])
files = [r for r in recs if r["type"] == "file"]
assert [f["bytes"] for f in files] == [1000000, 300000, 300000, 12345, 9000], files
assert {f["path"] for f in files[1:3]} == {"/data/raw/b.bin", "/logs/hard.bin"}, files
assert files[1]["inode"] == files[2]["inode"]
top = [r for r in recs if r["type"] == "top_dir"]
# --depth 10 lists all but the chain's directories at depths 11..15
assert sorted(t["path"].count("/") for t in top) == [11, 12, 13, 14, 15], top
EOF
	grep -q '"path":"/with space/é ü"' "$r1" || jo_die "$e: UTF-8 path not in the report"

	# changes, then growth
	head -c 2000000 /dev/urandom >"$mnt/data/raw/big.bin"
	rm "$mnt/data/clean/c.csv"
	mv "$mnt/logs/2024" "$mnt/data/2024"
	mkdir "$mnt/newdir"
	echo hi >"$mnt/newdir/x"
	sync
	r2=$JO_T/$e-r2.json
	run_usage "$meta" "$r2" --depth 10 --since "$r1"
	$CHECK growth "$r1" "$r2" || jo_die "$e: growth"
	$CHECK tree "$mnt" "$r2" "$BUCKETS" 90d || jo_die "$e: second report differs from the mount"
	grep -q '"path":"/newdir".*"new":true' "$r2" || jo_die "$e: /newdir is not new"

	# a subtree, other buckets and cold edge
	r3=$JO_T/$e-r3.json
	run_usage "$meta" "$r3" /data --depth 3 --buckets 12h,10d,100d --cold 30d
	$CHECK tree "$mnt" "$r3" 12h,10d,100d 30d || jo_die "$e: subtree report differs from the mount"

	# a live writer: files move between two directories while the walk runs
	mkdir -p "$mnt/live/p" "$mnt/live/q"
	for i in $(seq 1 40); do head -c 1000 /dev/zero >"$mnt/live/p/f$i"; done
	sync
	(
		while [ ! -e "$JO_T/stop-$e" ]; do
			for i in $(seq 1 40); do
				if [ -e "$mnt/live/p/f$i" ]; then mv "$mnt/live/p/f$i" "$mnt/live/q/f$i"
				else mv "$mnt/live/q/f$i" "$mnt/live/p/f$i"; fi
			done
		done
	) &
	writer=$!
	sleep 0.5
	r4=$JO_T/$e-r4.json
	for k in 1 2 3; do
		run_usage "$meta" "$r4" /live --depth 1
		python3 - "$r4" "$e" <<'EOF' || { touch "$JO_T/stop-$e"; wait $writer; jo_die "$e: live walk"; }
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
if s["point_in_time"]:
    assert (s["files"], s["bytes"], s["dirs"]) == (40, 40000, 3), s
else:  # redis: a file moved mid-walk may be seen twice (kept once) or missed
    assert 36 <= s["files"] <= 40 and s["dirs"] == 3, s
EOF
	done
	touch "$JO_T/stop-$e"
	wait $writer

	# removed while open: a file deleted from the trash while the mount holds it open
	head -c 3333 /dev/urandom >"$mnt/held"
	rm "$mnt/held"
	held=$(find "$mnt/.trash" -name '*-held' | head -n 1)
	[ -n "$held" ] || jo_die "$e: the removed file is not in the trash"
	exec 7<"$held"
	rm "$held"
	r5=$JO_T/$e-r5.json
	run_usage "$meta" "$r5" --depth 0
	exec 7<&-
	python3 - "$r5" <<'EOF' || jo_die "$e: the file removed while open"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert (s["open_unlinked_files"], s["open_unlinked_bytes"]) == (1, 3333), s
EOF
	jfs_umount "$mnt"
	echo "usage_engines: $e ok" >&2
done
echo "usage_engines: ok"
