# shellcheck shell=bash
# Shared body of the gc integration tests: volumes made by the real juicefs,
# files written through a FUSE mount run with --no-bgjob --max-deletes 0 (so
# the client leaves its deletions pending, as a fleet that hands gc to
# jfsops does), some sharing slices through copy_file_range, half removed;
# then `jfsops gc` (dry run, then 4 parallel workers; or workers killed with
# SIGKILL and restarted) and the end state is checked: juicefs fsck clean,
# juicefs gc finds 0 leaked / 0 pending, every remaining file keeps its
# sha256, the bucket holds exactly the referenced objects.
# Needs services.sh sourced and jo_setup done.

GCTOOL=$JO_REPO/tests/integration/lib/gc_tool.py

# gc_juicefs_gc META LOG: a dry `juicefs gc` with no age window.
gc_juicefs_gc() {
	JFS_GC_SKIPPEDTIME=0 "$JUICEFS" gc "$1" --no-agent >"$2" 2>&1 ||
		{ tail -n 20 "$2" >&2; jo_die "juicefs gc failed"; }
}

gc_count() { python3 "$GCTOOL" gccount "$1" "$2"; }

# gc_no_leaks META LOG NAME WHAT: juicefs gc (LOG, just run) found no leaked
# object; else the script dies with what juicefs saw: its line, the leaked
# keys (a verbose juicefs gc) and whether each was in the bucket at the start
# (keys-t0-NAME.txt) and in the first dump (dump0-NAME.json), then WHAT.
gc_no_leaks() {
	local meta=$1 log=$2 name=$3 what=$4
	[ "$(gc_count "$log" leaked)" = 0 ] && return 0
	echo "$name: juicefs gc: $(python3 "$GCTOOL" gcline "$log")" >&2
	JFS_GC_SKIPPEDTIME=0 "$JUICEFS" gc "$meta" --no-agent --verbose >"$log.verbose" 2>&1 || true
	grep -o 'find leaked object: [^,]*' "$log.verbose" | head -n 20 | while read -r _ _ _ key; do
		local at0=no sid
		grep -qF "$key" "$JO_T/keys-t0-$name.txt" 2>/dev/null && at0=yes
		sid=$(basename "$key" | cut -d_ -f1)
		echo "    leaked $key (in the bucket at the start: $at0; slice $sid in the first dump: $(grep -c "\"id\": *$sid\b" "$JO_T/dump0-$name.json" 2>/dev/null || true))" >&2
	done || true
	jo_die "$name: $what"
}

# gc_ok_or_tasks_left RC SUMMARY_JSON: a worker of several may finish while a
# peer still holds a task's lease, or while a peer still plans (adding tasks
# that peer then works): then it exits 0 with status "tasks-left", no errors
# and tasks left (it did all it could); any other exit, or a tasks-left
# status with errors, is a failure.
gc_ok_or_tasks_left() {
	local rc=$1 sumfile=$2
	[ "$rc" = 0 ] || return 1
	python3 - "$sumfile" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ok = s["status"] != "tasks-left" or (s["errors"] == 0 and s["tasks_left"] > 0)
sys.exit(0 if ok and s["exit"] == 0 else 1)
PY
}

# gc_four_workers NAME OUT ID WHAT GC-ARGS...: four `gc GC-ARGS --id IDi --json`
# at once (summary in $JO_T/OUTi-NAME.json, stderr in .err beside it); each must
# end as gc_ok_or_tasks_left says, else the test dies naming WHAT i.
gc_four_workers() {
	local name=$1 out=$2 id=$3 what=$4 pids=() i rc
	shift 4
	for i in 1 2 3 4; do
		"$JO_BIN" gc "$@" --id "$id$i" --json >"$JO_T/$out$i-$name.json" 2>"$JO_T/$out$i-$name.err" &
		pids+=($!)
	done
	for i in 1 2 3 4; do
		rc=0
		wait "${pids[$((i - 1))]}" || rc=$?
		gc_ok_or_tasks_left $rc "$JO_T/$out$i-$name.json" ||
			{ cat "$JO_T/$out$i-$name.err" >&2; jo_die "$name: $what $i failed (exit $rc)"; }
	done
}

# gc_bucket_keys BUCKET NAME: the block keys in the bucket, sorted.
gc_bucket_keys() {
	local bucket=$1 name=$2
	case $bucket in
	http://*) s3_list_keys "${bucket##*/}" | cut -d' ' -f1 | { grep "^$name/chunks/" || true; } | sort ;;
	*) (cd "$bucket" && find "$name/chunks" -type f ! -name '.*' 2>/dev/null | sort) ;;
	esac
}

# gc_populate META BUCKET NAME TRASH MP: format, write, share, remove.
gc_populate() {
	local meta=$1 bucket=$2 name=$3 trash=$4 mp=$5
	jfs_format "$meta" "$bucket" "$name" --trash-days "$trash"
	jfs_mount "$meta" "$mp" --no-bgjob --max-deletes 0
	python3 "$GCTOOL" write "$mp/data" "$JO_T/mirror-$name" 7 "${JO_GC_FILES:-2000}"
	# a file shrunk and then removed: on Redis its chunk 1 is left behind
	python3 - "$mp/shrunk" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)
os.pwrite(fd, os.urandom(1 << 20), 0)
os.pwrite(fd, os.urandom(1 << 20), (64 << 20) + 4096)
os.fsync(fd)
os.ftruncate(fd, 1 << 20)
os.close(fd)
os.unlink(sys.argv[1])
PY
	local kept
	kept=$(python3 "$GCTOOL" remove "$mp/data" "$JO_T/mirror-$name" 7)
	echo "$name: $kept files kept" >&2
	jfs_umount "$mp"
}

# gc_check_end META BUCKET NAME MP: the end state every variant must reach.
gc_check_end() {
	local meta=$1 bucket=$2 name=$3 mp=$4
	gc_juicefs_gc "$meta" "$JO_T/gc-end-$name.log"
	echo "$name: juicefs gc after: $(python3 "$GCTOOL" gcline "$JO_T/gc-end-$name.log")" >&2
	[ "$(gc_count "$JO_T/gc-end-$name.log" leaked)" = 0 ] || jo_die "$name: juicefs gc finds leaked objects"
	[ "$(gc_count "$JO_T/gc-end-$name.log" pending)" = 0 ] || jo_die "$name: juicefs gc finds pending objects"
	"$JUICEFS" fsck "$meta" --no-agent >"$JO_T/fsck-$name.log" 2>&1 ||
		{ tail -n 20 "$JO_T/fsck-$name.log" >&2; jo_die "$name: juicefs fsck failed"; }
	jfs_dump "$meta" "$JO_T/dump-$name.json"
	python3 "$GCTOOL" refkeys "$JO_T/dump-$name.json" | sort -u >"$JO_T/ref-$name.txt"
	gc_bucket_keys "$bucket" "$name" >"$JO_T/have-$name.txt"
	if ! diff -q "$JO_T/ref-$name.txt" "$JO_T/have-$name.txt" >/dev/null; then
		diff "$JO_T/ref-$name.txt" "$JO_T/have-$name.txt" >"$JO_T/diff-$name.txt" || true
		head -n 10 "$JO_T/diff-$name.txt" >&2
		jo_die "$name: the bucket does not hold exactly the referenced objects"
	fi
	echo "$name: bucket holds exactly the $(wc -l <"$JO_T/ref-$name.txt") referenced objects" >&2
	jfs_mount "$meta" "$mp" --no-bgjob
	python3 "$GCTOOL" verify "$mp/data" "$JO_T/mirror-$name" || jo_die "$name: file contents changed"
	jfs_umount "$mp"
}

# gc_run_parallel META BUCKET NAME: dry run changes nothing; plan + 4 workers.
gc_run_parallel() {
	local meta=$1 bucket=$2 name=$3
	local mp=$JO_T/mnt-$name
	gc_populate "$meta" "$bucket" "$name" 0 "$mp"
	gc_juicefs_gc "$meta" "$JO_T/gc-before-$name.log"
	local before pend rc
	before=$(python3 "$GCTOOL" gcline "$JO_T/gc-before-$name.log")
	pend=$(gc_count "$JO_T/gc-before-$name.log" pending)
	echo "$name: juicefs gc before: $before" >&2
	[ "$pend" -gt 0 ] || jo_die "$name: expected pending objects before gc"
	gc_bucket_keys "$bucket" "$name" >"$JO_T/keys-before-$name.txt"

	# dry run: reports, changes nothing
	"$JO_BIN" gc "$meta" --json >"$JO_T/dry-$name.json" || jo_die "$name: dry run failed"
	python3 - "$JO_T/dry-$name.json" "$pend" <<'PY' || jo_die "$name: dry-run summary is wrong"
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert s["type"] == "summary" and s["dry_run"], s
assert s["objects"] >= int(sys.argv[2]), (s["objects"], sys.argv[2])
PY
	# a dry --plan says what would be deleted, as the dry run does (it said
	# "would delete 0 objects" while plain gc said 30)
	"$JO_BIN" gc "$meta" --plan --json >"$JO_T/dryplan-$name.json" || jo_die "$name: dry --plan failed"
	python3 - "$JO_T/dry-$name.json" "$JO_T/dryplan-$name.json" <<'PY' || jo_die "$name: dry --plan does not say what would be deleted"
import json, sys
a, b = (json.loads(open(f).read().splitlines()[-1]) for f in sys.argv[1:3])
assert b["dry_run"] and b["mode"] == "plan" and b["tasks_planned"] == 0, b
assert a["evaluated"] and b["evaluated"], (a, b)
for k in ("items", "slices", "objects", "bytes"):
    assert b[k] == a[k], (k, a[k], b[k])
assert b["objects"] > 0, b
PY
	local want
	want=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["objects"])' "$JO_T/dry-$name.json")
	"$JO_BIN" gc "$meta" --plan 2>/dev/null | grep -q "^gc dry-run (plan): would delete $want objects " ||
		jo_die "$name: the human dry --plan line does not say it would delete $want objects"
	# --count-only: the items the scans find, none evaluated, and it says so
	"$JO_BIN" gc "$meta" --plan --count-only --json >"$JO_T/dryplanc-$name.json" || jo_die "$name: dry --plan --count-only failed"
	python3 - "$JO_T/dry-$name.json" "$JO_T/dryplanc-$name.json" <<'PY' || jo_die "$name: --count-only does not count the items and say it evaluated none"
import json, sys
a, b = (json.loads(open(f).read().splitlines()[-1]) for f in sys.argv[1:3])
assert b["dry_run"] and b["mode"] == "plan" and not b["evaluated"], b
assert b["items"] == a["items"] > 0 and b["objects"] == 0, (a, b)
PY
	"$JO_BIN" gc "$meta" --plan --count-only 2>/dev/null | grep -q "items found, not evaluated" ||
		jo_die "$name: the human --count-only line does not say it evaluated nothing"
	rc=0
	"$JO_BIN" gc "$meta" --count-only >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || jo_die "$name: --count-only without --plan: exit $rc, want 2"
	gc_bucket_keys "$bucket" "$name" | cmp -s - "$JO_T/keys-before-$name.txt" ||
		jo_die "$name: the dry run deleted objects"
	gc_juicefs_gc "$meta" "$JO_T/gc-dry-$name.log"
	[ "$(python3 "$GCTOOL" gcline "$JO_T/gc-dry-$name.log")" = "$before" ] ||
		jo_die "$name: the dry run changed the metadata"

	# plan twice (no duplicate work), then 4 workers in parallel
	"$JO_BIN" gc "$meta" --plan --delete --task-size 50 --json >"$JO_T/plan1-$name.json" ||
		jo_die "$name: plan failed"
	"$JO_BIN" gc "$meta" --plan --delete --task-size 50 --json >"$JO_T/plan2-$name.json" ||
		jo_die "$name: second plan failed"
	python3 - "$JO_T/plan1-$name.json" "$JO_T/plan2-$name.json" <<'PY' || jo_die "$name: planning twice duplicated work"
import json, sys
a = json.loads(open(sys.argv[1]).read().splitlines()[-1])
b = json.loads(open(sys.argv[2]).read().splitlines()[-1])
assert a["tasks_planned"] > 0 and a["items_planned"] > 0, a
assert b["tasks_planned"] == 0 and b["items_planned"] == 0, b
print("planned %d tasks of %d items" % (a["tasks_planned"], a["items_planned"]), file=sys.stderr)
PY
	# each worker is held to 200 deletes/s, so a task lasts long enough for the
	# others to start: one fast worker cannot drain every task alone
	gc_four_workers "$name" work w "worker" "$meta" --worker --delete --delete-rate 200 \
		--audit "$JO_T/audit-$name.jsonl"
	python3 - "$JO_T/audit-$name.jsonl" "$JO_T"/work?-"$name".json <<'PY' || jo_die "$name: worker summaries/audit are wrong"
import json, sys
audit = [json.loads(l) for l in open(sys.argv[1])]
sums = [json.loads(open(f).read().splitlines()[-1]) for f in sys.argv[2:]]
done = sum(s["tasks_done"] for s in sums)
objs = sum(s["objects"] for s in sums)
assert all(s["errors"] == 0 for s in sums), sums
assert sum(1 for s in sums if s["tasks_done"] > 0) >= 2, "work was not shared"
assert len(audit) == objs, (len(audit), objs)
for a in audit:
    assert a["action"] == "delete" and a["result"] == "ok" and a["worker"].startswith("w"), a
    for k in ("time", "task", "key", "slice_id", "reason"):
        assert k in a, a
print("%d tasks, %d objects deleted by %d workers" % (done, objs, len(sums)), file=sys.stderr)
PY
	local left
	left=$("$JO_BIN" gc "$meta" --status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"])')
	[ "$left" = 0 ] || jo_die "$name: $left tasks left after the workers"
	gc_check_end "$meta" "$bucket" "$name" "$mp"
}

# gc_run_killed META BUCKET NAME: workers killed with SIGKILL at random
# moments and restarted, many times over; then the same end state.
gc_run_killed() {
	local meta=$1 bucket=$2 name=$3
	local mp=$JO_T/mnt-$name
	gc_populate "$meta" "$bucket" "$name" 0 "$mp"
	"$JO_BIN" gc "$meta" --plan --delete --task-size 10 >/dev/null || jo_die "$name: plan failed"
	local round pids i t
	for round in $(seq 1 "${JO_GC_KILL_ROUNDS:-8}"); do
		pids=()
		for i in 1 2 3 4; do
			"$JO_BIN" gc "$meta" --worker --delete --id "k$round-$i" --lease 2s \
				--delete-rate 300 >/dev/null 2>>"$JO_T/killed-$name.err" &
			pids+=($!)
		done
		t=$(python3 -c "import random; print('%.2f' % random.uniform(0.2, 1.5))")
		sleep "$t"
		for i in "${pids[@]}"; do
			if [ $((RANDOM % 4)) != 0 ]; then kill -KILL "$i" 2>/dev/null || true; fi
		done
		for i in "${pids[@]}"; do wait "$i" 2>/dev/null || true; done
		# re-planning while tasks are half done must not duplicate them
		if [ $((round % 3)) = 0 ]; then
			"$JO_BIN" gc "$meta" --plan --delete --task-size 10 >/dev/null || jo_die "$name: re-plan failed"
		fi
	done
	# finish: leases of killed workers expire (2 s), then anyone takes over;
	# until then a run says so (exit 0, "tasks-left")
	local tries=0 left rc
	while :; do
		rc=0
		"$JO_BIN" gc "$meta" --delete --lease 2s --json >"$JO_T/final-$name.json" \
			2>>"$JO_T/killed-$name.err" || rc=$?
		gc_ok_or_tasks_left $rc "$JO_T/final-$name.json" || jo_die "$name: final run failed (exit $rc)"
		left=$("$JO_BIN" gc "$meta" --status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"])')
		if [ "$rc" = 0 ]; then
			[ "$left" = 0 ] || jo_die "$name: exit 0 with $left tasks left"
			break
		fi
		tries=$((tries + 1))
		[ $tries -lt 20 ] || jo_die "$name: tasks never finished"
		sleep 1
	done
	gc_check_end "$meta" "$bucket" "$name" "$mp"
}

# gc_redis_mode META: standalone, sentinel or cluster, as juicefs reads a
# redis:// META (a comma-separated host list is a Sentinel set when its first
# item, the master's name, has no port; a Cluster's nodes otherwise).
gc_redis_mode() {
	local hp=${1#redis://}
	hp=${hp#rediss://}
	hp=${hp%%\?*}
	hp=${hp%/*}
	hp=${hp##*@}
	case $hp in
	*,*) case ${hp%%,*} in *:*) echo cluster ;; *) echo sentinel ;; esac ;;
	*) echo standalone ;;
	esac
}

# gc_redis_key META KEY: KEY as the volume names it (juicefs prefixes every
# key with {DB} on a Cluster).
gc_redis_key() {
	if [ "$(gc_redis_mode "$1")" = cluster ]; then echo "{${1##*/}}$2"; else echo "$2"; fi
}

# gc_redis_cli META ARGS...: redis-cli against the db of a redis:// META:
# a standalone server, the master a Sentinel set names now (its sentinels
# asked with SENTINEL_PASSWORD, as juicefs does) or a Cluster (redirections
# followed; keys named by gc_redis_key). A password in META goes in
# REDISCLI_AUTH; without one, the caller's REDISCLI_AUTH (if any) is used.
# A rediss:// META goes over TLS with the CA of its tls-ca-cert-file.
gc_redis_cli() {
	local meta=$1 hp db mode s addr= q
	local -a env=() sauth=() tls=()
	shift
	mode=$(gc_redis_mode "$meta")
	case $meta in
	rediss://*\?*)
		q=${meta#*\?}
		q=$(echo "$q" | tr '&' '\n' | sed -n 's/^tls-ca-cert-file=//p')
		tls=(--tls ${q:+--cacert "$q"})
		meta=${meta%%\?*}
		;;
	rediss://*) tls=(--tls) ;;
	esac
	hp=${meta#redis://}
	hp=${hp#rediss://}
	db=${hp##*/}
	hp=${hp%/*}
	case $hp in *@*) s=${hp%@*} && env=(env "REDISCLI_AUTH=${s#*:}") ;; esac
	hp=${hp##*@}
	case $mode in
	cluster)
		s=${hp%%,*}
		"${env[@]}" redis-cli -c -h "${s%:*}" -p "${s##*:}" "$@"
		return
		;;
	sentinel)
		[ -z "${SENTINEL_PASSWORD:-}" ] || sauth=(-a "$SENTINEL_PASSWORD" --no-auth-warning)
		for s in $(echo "${hp#*,}" | tr , ' '); do
			case $s in *:*) ;; *) s=$s:26379 ;; esac
			addr=$(redis-cli -h "${s%:*}" -p "${s##*:}" "${sauth[@]}" \
				sentinel get-master-addr-by-name "${hp%%,*}" 2>/dev/null | paste -sd:) || true
			case $addr in *:[0-9]*) break ;; esac
		done
		case $addr in *:[0-9]*) hp=$addr ;; *) jo_die "gc_redis_cli: no sentinel of $hp names the master" ;; esac
		;;
	esac
	"${env[@]}" redis-cli "${tls[@]}" -h "${hp%:*}" -p "${hp##*:}" -n "$db" "$@"
}

# gc_age_delslices META SECONDS: move every delayed-slice timestamp back.
gc_age_delslices() {
	local meta=$1 secs=$2
	case $meta in
	sqlite3://* | postgres://* | mysql://*)
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/sqlmeta.py" age-delslices "$meta" "$secs"
		;;
	etcd://*)
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/kvmeta.py" age-delslices "$meta" "$secs"
		;;
	redis://* | rediss://*)
		gc_redis_cli "$meta" EVAL "
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local v = redis.call('HGET', KEYS[1], f)
  local id, ts = string.match(f, '^(%d+)_(%d+)$')
  redis.call('HDEL', KEYS[1], f)
  redis.call('HSET', KEYS[1], id .. '_' .. (tonumber(ts) - $secs), v)
end
return 1" 1 "$(gc_redis_key "$meta" delSlices)" >/dev/null
		;;
	esac
}

# gc_trash_entries META: how many entries the trash hour directories hold.
gc_trash_entries() {
	local meta=$1
	case $meta in
	sqlite3://* | postgres://* | mysql://*)
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/sqlmeta.py" trash-entries "$meta"
		;;
	etcd://*)
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/kvmeta.py" trash-entries "$meta"
		;;
	redis://* | rediss://*)
		# entry values are [type u8][inode u64 BE]: hex from Lua (its numbers are doubles)
		local n=0 h
		for h in $(gc_redis_cli "$meta" EVAL "local r = {}
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
  r[#r + 1] = string.format(string.rep('%02x', 8), string.byte(v, 2, 9))
end
return r" 1 "$(gc_redis_key "$meta" d$((0x7FFFFFFF10000000)))"); do
			n=$((n + $(gc_redis_cli "$meta" HLEN "$(gc_redis_key "$meta" "d$((16#$h))")")))
		done
		echo "$n"
		;;
	esac
}

# gc_doctor_backlog META ok|warn WHAT: jfsops doctor's gc-backlog verdict.
gc_doctor_backlog() {
	local meta=$1 want=$2 what=$3 got
	"$JO_BIN" doctor "$meta" --json >"$JO_T/doctor.json" 2>&1 || true
	got=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("check") == "gc-backlog":
        print(r["result"], "|", r["detail"])' "$JO_T/doctor.json")
	case $got in
	"$want |"*) echo "$what: gc-backlog $got" >&2 ;;
	*) cat "$JO_T/doctor.json" >&2; jo_die "$what: gc-backlog should be $want, got '$got'" ;;
	esac
}

# gc_age_trash META SECONDS: rename every trash hour directory as if it had
# been made SECONDS earlier (names are the hour, UTC: 2006-01-02-15).
gc_age_trash() {
	local meta=$1 secs=$2 old new
	case $meta in
	sqlite3://* | postgres://* | mysql://*)
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/sqlmeta.py" age-trash "$meta" "$secs"
		;;
	etcd://*)
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/kvmeta.py" age-trash "$meta" "$secs"
		;;
	redis://* | rediss://*)
		local trash
		trash=$(gc_redis_key "$meta" d$((0x7FFFFFFF10000000)))
		for old in $(gc_redis_cli "$meta" HKEYS "$trash"); do
			new=$(python3 -c 'import datetime as dt, sys
t = dt.datetime.strptime(sys.argv[1], "%Y-%m-%d-%H") - dt.timedelta(seconds=int(sys.argv[2]))
print(t.strftime("%Y-%m-%d-%H"))' "$old" "$secs")
			gc_redis_cli "$meta" EVAL "local v = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1]); redis.call('HSET', KEYS[1], ARGV[2], v); return 1" \
				1 "$trash" "$old" "$new" >/dev/null
		done
		;;
	esac
}

# gc_run_trash META BUCKET NAME: TrashDays 1: delayed slices (made by a
# compaction) and trash entries are kept while young and reclaimed once old
# (the trash holds plain files, files sharing slices, a hard link, a symlink,
# a file with an xattr, a removed tree and an empty directory).
gc_run_trash() {
	local meta=$1 bucket=$2 name=$3
	local mp=$JO_T/mnt-$name
	jfs_format "$meta" "$bucket" "$name" --trash-days 1
	jfs_mount "$meta" "$mp" --no-bgjob --max-deletes 0 --enable-xattr
	mkdir -p "$mp/data"
	# fragmented files: many slices per chunk, so compaction has work
	python3 - "$mp/data" <<'PY'
import os, random, sys
r = random.Random(3)
for n in range(6):
    p = os.path.join(sys.argv[1], "frag%d" % n)
    fd = os.open(p, os.O_CREAT | os.O_RDWR)
    for i in range(12):
        os.pwrite(fd, r.randbytes(r.randrange(1000, 300000)), r.randrange(0, 1 << 20))
        os.fsync(fd)
    os.close(fd)
PY
	python3 "$GCTOOL" write "$mp/data/plain" "$JO_T/mirror-$name.plain" 11 200
	(cd "$mp/data" && sha256sum frag*) | sed 's| | |' >"$JO_T/mirror-$name.frag"
	# half the plain files go to the trash (TrashDays 1)
	python3 "$GCTOOL" remove "$mp/data/plain" "$JO_T/mirror-$name.plain" 11 >/dev/null
	# every other shape an entry of the trash can have
	mkdir -p "$mp/data/tree/sub" "$mp/data/empty"
	head -c 300000 /dev/urandom >"$mp/data/hard1"
	ln "$mp/data/hard1" "$mp/data/hard2"
	(cd "$mp/data" && sha256sum hard2) >"$JO_T/mirror-$name.hard"
	ln -s plain "$mp/data/sym"
	head -c 5000 /dev/urandom >"$mp/data/xa"
	python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.jfsops", b"test")' "$mp/data/xa" ||
		jo_die "$name: setxattr failed"
	for i in 1 2 3; do head -c 70000 /dev/urandom >"$mp/data/tree/sub/f$i"; done
	rm "$mp/data/hard1" "$mp/data/sym" "$mp/data/xa"
	rm -r "$mp/data/tree"
	rmdir "$mp/data/empty"
	jfs_umount "$mp"
	# juicefs's own compaction with trash on leaves delayed slices
	"$JUICEFS" gc "$meta" --compact --no-agent >"$JO_T/compact-$name.log" 2>&1 ||
		{ tail "$JO_T/compact-$name.log" >&2; jo_die "$name: juicefs gc --compact failed"; }
	gc_juicefs_gc "$meta" "$JO_T/gc-t0-$name.log"
	if [ "$(gc_count "$JO_T/gc-t0-$name.log" leaked)" != 0 ]; then
		# juicefs's own compaction left an object nothing references (seen
		# in a CI run under load, before jfsops had touched the volume): the
		# referee reclaims it so that every later count is jfsops's alone
		echo "$name: juicefs's compaction leaked: $(python3 "$GCTOOL" gcline "$JO_T/gc-t0-$name.log"); juicefs gc --delete reclaims it first" >&2
		JFS_GC_SKIPPEDTIME=0 "$JUICEFS" gc "$meta" --delete --no-agent >"$JO_T/gc-t0d-$name.log" 2>&1 ||
			{ tail -n 20 "$JO_T/gc-t0d-$name.log" >&2; jo_die "juicefs gc --delete failed"; }
		gc_juicefs_gc "$meta" "$JO_T/gc-t0-$name.log"
		[ "$(gc_count "$JO_T/gc-t0-$name.log" leaked)" = 0 ] || jo_die "$name: juicefs gc --delete left leaked objects"
	fi
	local c0 keys0
	c0=$(gc_count "$JO_T/gc-t0-$name.log" compacted)
	echo "$name: before: $(python3 "$GCTOOL" gcline "$JO_T/gc-t0-$name.log")" >&2
	[ "$c0" -gt 0 ] || jo_die "$name: the compaction left no delayed slices"
	gc_bucket_keys "$bucket" "$name" >"$JO_T/keys-t0-$name.txt"

	jfs_dump "$meta" "$JO_T/dump0-$name.json"
	local drift0 trash0
	drift0=$(python3 "$GCTOOL" drift "$JO_T/dump0-$name.json")
	trash0=$(gc_trash_entries "$meta")
	[ "$trash0" -gt 20 ] || jo_die "$name: only $trash0 entries in the trash"

	# young: nothing of the delayed slices or the trash goes
	"$JO_BIN" gc "$meta" --delete --threads 4 --json >"$JO_T/t1-$name.json" || jo_die "$name: gc failed"
	gc_juicefs_gc "$meta" "$JO_T/gc-t1-$name.log"
	[ "$(gc_count "$JO_T/gc-t1-$name.log" compacted)" = "$c0" ] ||
		jo_die "$name: young delayed slices were reclaimed"
	gc_no_leaks "$meta" "$JO_T/gc-t1-$name.log" "$name" "leaked objects after a run with everything young"
	gc_bucket_keys "$bucket" "$name" | cmp -s - "$JO_T/keys-t0-$name.txt" ||
		jo_die "$name: objects were deleted while everything was young"
	[ "$(gc_trash_entries "$meta")" = "$trash0" ] || jo_die "$name: young trash entries went"

	# old delayed slices: two days back -> reclaimed (the trash is still young)
	gc_age_delslices "$meta" $((2 * 86400))
	gc_doctor_backlog "$meta" warn "$name: doctor with overdue delayed slices"
	"$JO_BIN" gc "$meta" --delete --threads 4 --json >"$JO_T/t2-$name.json" || jo_die "$name: gc failed"
	python3 - "$JO_T/t2-$name.json" <<'PY' || jo_die "$name: old delayed slices were not reclaimed"
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
d = s["kinds"]["delslice"]
assert d["items"] > 0 and d["slices"] > 0 and d["objects"] > 0 and s["errors"] == 0, s
print("delayed: %d entries, %d slices, %d objects reclaimed" % (d["items"], d["slices"], d["objects"]), file=sys.stderr)
PY
	gc_juicefs_gc "$meta" "$JO_T/gc-t2-$name.log"
	echo "$name: after: $(python3 "$GCTOOL" gcline "$JO_T/gc-t2-$name.log")" >&2
	[ "$(gc_count "$JO_T/gc-t2-$name.log" compacted)" = 0 ] || jo_die "$name: delayed slices left"
	[ "$(gc_count "$JO_T/gc-t2-$name.log" pending)" = 0 ] || jo_die "$name: pending left"
	gc_no_leaks "$meta" "$JO_T/gc-t2-$name.log" "$name" "leaked objects after the delayed slices were reclaimed"
	[ "$(gc_trash_entries "$meta")" = "$trash0" ] || jo_die "$name: young trash entries went"

	gc_doctor_backlog "$meta" ok "$name: doctor before the trash expired"
	# an old trash: hour directories three days back (past TrashDays + 2h)
	gc_age_trash "$meta" $((3 * 86400))
	gc_doctor_backlog "$meta" warn "$name: doctor with an overdue trash"
	"$JO_BIN" gc "$meta" --json >"$JO_T/t3dry-$name.json" || jo_die "$name: dry gc failed"
	[ "$(gc_trash_entries "$meta")" = "$trash0" ] || jo_die "$name: a dry run changed the trash"
	"$JO_BIN" gc "$meta" --delete --threads 4 --json >"$JO_T/t3-$name.json" || jo_die "$name: gc failed"
	python3 - "$JO_T/t3dry-$name.json" "$JO_T/t3-$name.json" "$trash0" <<'PY' || jo_die "$name: the old trash was not reclaimed"
import json, sys
dry = json.loads(open(sys.argv[1]).read().splitlines()[-1])["kinds"]["trash"]
s = json.loads(open(sys.argv[2]).read().splitlines()[-1])
t = s["kinds"]["trash"]
n = int(sys.argv[3])
assert dry["items"] == n and dry["objects"] > 0, (dry, n)
assert t["items"] == n and t["objects"] >= dry["objects"] and s["errors"] == 0, (t, n)
print("trash: %d entries, %d objects reclaimed (dry run: %d)" % (t["items"], t["objects"], dry["objects"]), file=sys.stderr)
PY
	[ "$(gc_trash_entries "$meta")" = 0 ] || jo_die "$name: trash entries left"
	gc_doctor_backlog "$meta" ok "$name: doctor after gc"
	jfs_dump "$meta" "$JO_T/dump3-$name.json"
	[ "$(python3 "$GCTOOL" drift "$JO_T/dump3-$name.json")" = "$drift0" ] ||
		jo_die "$name: usedSpace/usedInodes drifted (before: $drift0)"
	gc_juicefs_gc "$meta" "$JO_T/gc-t3-$name.log"
	echo "$name: trash reclaimed: $(python3 "$GCTOOL" gcline "$JO_T/gc-t3-$name.log")" >&2
	for what in leaked pending compacted; do
		[ "$(gc_count "$JO_T/gc-t3-$name.log" $what)" = 0 ] || jo_die "$name: $what objects left"
	done
	"$JUICEFS" fsck "$meta" --no-agent >"$JO_T/fsck-$name.log" 2>&1 ||
		{ tail -n 20 "$JO_T/fsck-$name.log" >&2; jo_die "$name: juicefs fsck failed"; }
	jfs_dump "$meta" "$JO_T/dump-$name.json"
	python3 "$GCTOOL" refkeys "$JO_T/dump-$name.json" | sort -u >"$JO_T/ref-$name.txt"
	gc_bucket_keys "$bucket" "$name" | cmp -s - "$JO_T/ref-$name.txt" ||
		jo_die "$name: the bucket does not hold exactly the referenced objects"
	jfs_mount "$meta" "$mp" --no-bgjob
	python3 "$GCTOOL" verify "$mp/data/plain" "$JO_T/mirror-$name.plain" || jo_die "$name: content changed"
	(cd "$mp/data" && sha256sum -c --quiet "$JO_T/mirror-$name.frag") || jo_die "$name: fragmented files changed"
	(cd "$mp/data" && sha256sum -c --quiet "$JO_T/mirror-$name.hard") || jo_die "$name: the hard link changed"
	[ "$(stat -c %h "$mp/data/hard2")" = 1 ] || jo_die "$name: hard2 does not have 1 link"
	[ -z "$(ls -A "$mp/.trash")" ] || jo_die "$name: the trash is not empty"
	jfs_umount "$mp"
}

# gc_run_beside_client META BUCKET NAME: a mount WITH background jobs keeps
# writing and removing files while jfsops workers run; no errors either side.
gc_run_beside_client() {
	local meta=$1 bucket=$2 name=$3
	local mp=$JO_T/mnt-$name
	JO_GC_FILES=${JO_GC_BESIDE_FILES:-800} gc_populate "$meta" "$bucket" "$name" 0 "$mp"
	jfs_mount "$meta" "$mp"
	python3 - "$mp/data" "$JO_T/mirror-$name" <<'PY' &
import hashlib, os, random, sys, time
d, mirror = sys.argv[1], sys.argv[2]
r = random.Random(5)
keep = [l.split(None, 1) for l in open(mirror)]
keep = [(h, p.strip()) for h, p in keep]
for i in range(150):
    p = "live/n%04d" % i
    os.makedirs(os.path.join(d, "live"), exist_ok=True)
    data = r.randbytes(r.randrange(1, 200000))
    with open(os.path.join(d, p), "wb") as f:
        f.write(data)
    keep.append((hashlib.sha256(data).hexdigest(), p))
    if i % 3 == 0 and keep:
        h, q = keep.pop(r.randrange(len(keep)))
        os.unlink(os.path.join(d, q))
    time.sleep(0.01)
with open(mirror, "w") as m:
    for h, p in keep:
        m.write("%s %s\n" % (h, p))
PY
	local wpid=$!
	gc_four_workers "$name" beside b "worker beside a client" "$meta" --delete --task-size 20
	wait $wpid || jo_die "$name: the client's writer failed"
	grep -qiE '<(ERROR|FATAL)>' "$JO_T"/mount-*.log && { grep -iE '<(ERROR|FATAL)>' "$JO_T"/mount-*.log | tail -n 5 >&2; jo_die "$name: the client logged errors"; }
	jfs_umount "$mp"
	# what the client left pending meanwhile (its own deletes are on now)
	"$JO_BIN" gc "$meta" --delete >/dev/null || jo_die "$name: final gc failed"
	gc_check_end "$meta" "$bucket" "$name" "$mp"
}

# gc_leased META: "TOTAL LEASED" task counts.
gc_leased() {
	"$JO_BIN" gc "$1" --status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["tasks"], d["leased"])'
}

# gc_run_signals META BUCKET NAME: --max-time stops claiming and releases;
# SIGTERM finishes the batch, releases the lease and exits 143; metrics file.
gc_run_signals() {
	local meta=$1 bucket=$2 name=$3
	local mp=$JO_T/mnt-$name rc counts
	JO_GC_FILES=${JO_GC_SIGNAL_FILES:-600} gc_populate "$meta" "$bucket" "$name" 0 "$mp"
	"$JO_BIN" gc "$meta" --plan --delete --task-size 20 >/dev/null || jo_die "$name: plan failed"
	rc=0
	"$JO_BIN" gc "$meta" --worker --delete --delete-rate 20 --max-time 2s --json \
		--metrics-file "$JO_T/$name.prom" >"$JO_T/maxtime-$name.json" || rc=$?
	[ $rc = 0 ] || jo_die "$name: --max-time run exited $rc"
	counts=$(gc_leased "$meta")
	set -- $counts
	[ "$1" -gt 0 ] || jo_die "$name: --max-time did not stop early"
	[ "$2" = 0 ] || jo_die "$name: --max-time left $2 tasks leased"
	grep -q '^jfsops_gc_last_run_objects_deleted{volume="[^"]*",kind="slice"} [1-9]' "$JO_T/$name.prom" ||
		jo_die "$name: metrics file lacks deleted objects"
	grep -q '^jfsops_gc_last_success_timestamp_seconds{volume="[^"]*"} [0-9]' "$JO_T/$name.prom" ||
		jo_die "$name: metrics file lacks the last success time"
	# SIGTERM: one task per kind, so the worker's first delete batch holds every
	# pending object; at 10 deletes/s it is far from done when the signal comes
	"$JO_BIN" gc "$meta" --reset-tasks --delete >/dev/null || jo_die "$name: reset failed"
	"$JO_BIN" gc "$meta" --plan --delete --task-size 100000 >/dev/null || jo_die "$name: plan failed"
	local pending
	pending=$("$JO_BIN" gc "$meta" --worker --json | python3 -c 'import json, sys; print(json.loads(sys.stdin.read().splitlines()[-1])["objects"])')
	[ "$pending" -ge 50 ] || jo_die "$name: only $pending objects pending before SIGTERM"
	"$JO_BIN" gc "$meta" --worker --delete --delete-rate 10 --threads 1 \
		--audit "$JO_T/term-$name.jsonl" >/dev/null 2>&1 &
	local pid=$!
	sleep 1.5
	kill -TERM $pid
	rc=0
	wait $pid || rc=$?
	[ $rc = 143 ] || jo_die "$name: SIGTERM exit code $rc, expected 143"
	# the batch in flight was finished (not cut after ~15 rate-limited deletes),
	# and every slice it touched lost all its blocks
	python3 - "$JO_T/term-$name.jsonl" $((4 << 20)) "$pending" <<'PY' || jo_die "$name: SIGTERM cut a delete batch"
import collections, json, sys
bs, pending = int(sys.argv[2]), int(sys.argv[3])
n = sum(1 for line in open(sys.argv[1]) if json.loads(line)["result"] == "ok")
assert n >= min(pending, 1000), "only %d of %d pending objects deleted: the batch was cut" % (n, pending)
ok = collections.Counter()
size = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    assert r["result"] == "ok", r
    ok[r["slice_id"]] += 1
    size[r["slice_id"]] = r["slice_size"]
assert ok, "nothing was deleted before the signal"
part = [s for s in ok if ok[s] != (size[s] + bs - 1) // bs]
assert not part, "slices deleted in part: %s" % part[:5]
print("SIGTERM: the batch was finished: %d slices (%d objects), all their blocks deleted" % (len(ok), n), file=sys.stderr)
PY
	counts=$(gc_leased "$meta")
	set -- $counts
	[ "$2" = 0 ] || jo_die "$name: SIGTERM left $2 tasks leased"
	echo "$name: after --max-time and SIGTERM: $1 tasks left, none leased" >&2
	case $bucket in http://*) ;; *) gc_symlinked_chunks "$meta" "$bucket" "$name" "$mp" ;; esac
	gc_dead_worker "$meta" "$name"
	"$JO_BIN" gc "$meta" --delete >/dev/null || jo_die "$name: final run failed"
	gc_check_end "$meta" "$bucket" "$name" "$mp"
}

# gc_symlinked_chunks META BUCKET NAME MP (file storage): half the files
# left are removed (through a mount that leaves its deletions pending), then
# every directory of NAME/chunks/ is moved outside the bucket and replaced by
# a symlink to it. gc must delete nothing through them (exit 4, every delete
# refused, the copy outside untouched, the links still there); with the
# directories back, the caller's next run reclaims everything.
gc_symlinked_chunks() {
	local meta=$1 bucket=$2 name=$3 mp=$4 out=$JO_T/outside-$name c rc before after
	jfs_mount "$meta" "$mp" --no-bgjob --max-deletes 0
	python3 "$GCTOOL" remove "$mp/data" "$JO_T/mirror-$name" 13 >/dev/null
	jfs_umount "$mp"
	mkdir -p "$out"
	for c in "$bucket/$name/chunks"/*; do
		mv "$c" "$out/"
		ln -s "$out/${c##*/}" "$c"
	done
	before=$(cd "$out" && find . -printf '%p %s %y\n' | sort | sha256sum)
	rc=0
	"$JO_BIN" gc "$meta" --delete --json --audit "$JO_T/symlinked-$name.jsonl" \
		>"$JO_T/symlinked-$name.json" 2>"$JO_T/symlinked-$name.err" || rc=$?
	[ $rc = 4 ] || { cat "$JO_T/symlinked-$name.err" >&2; jo_die "$name: gc through symlinked chunks/ dirs: exit $rc, expected 4"; }
	python3 - "$JO_T/symlinked-$name.jsonl" <<'PY' || jo_die "$name: the audit of the run through symlinks is wrong"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs, "nothing was tried"
bad = [r for r in recs if r["result"] != "error" or "EUNSUPPORTED" not in json.dumps(r)]
assert not bad, bad[:3]
print("%d deletes refused (EUNSUPPORTED: a symlink on the way)" % len(recs), file=sys.stderr)
PY
	after=$(cd "$out" && find . -printf '%p %s %y\n' | sort | sha256sum)
	[ "$before" = "$after" ] || jo_die "$name: gc deleted objects behind a symlink"
	for c in "$out"/*; do
		[ -L "$bucket/$name/chunks/${c##*/}" ] || jo_die "$name: gc removed the symlink chunks/${c##*/}"
		rm "$bucket/$name/chunks/${c##*/}"
		mv "$c" "$bucket/$name/chunks/"
	done
	echo "$name: nothing deleted through symlinked chunks/ directories" >&2
}

# gc_dead_worker META NAME: a worker killed while it holds a task's lease;
# a run right after it must not say "ok": status tasks-left, a line saying
# what is left, exit 0 (it did all it could: the task is under a lease).
# Once the lease has expired the next run takes over.
gc_dead_worker() {
	local meta=$1 name=$2 pid rc i counts
	"$JO_BIN" gc "$meta" --plan --delete --task-size 5 >/dev/null || jo_die "$name: plan failed"
	"$JO_BIN" gc "$meta" --worker --delete --delete-rate 2 --lease 5s --id dead \
		>/dev/null 2>&1 &
	pid=$!
	for i in $(seq 1 50); do
		counts=$(gc_leased "$meta")
		set -- $counts
		[ "$2" -gt 0 ] && break
		sleep 0.2
	done
	[ "$2" -gt 0 ] || jo_die "$name: the worker to be killed never held a lease"
	kill -KILL $pid
	wait $pid 2>/dev/null || true
	rc=0
	"$JO_BIN" gc "$meta" --worker --delete --json >"$JO_T/dead-$name.json" 2>"$JO_T/dead-$name.err" || rc=$?
	[ $rc = 0 ] || { cat "$JO_T/dead-$name.err" >&2; jo_die "$name: run beside a dead worker's lease: exit $rc, expected 0 (status tasks-left)"; }
	python3 - "$JO_T/dead-$name.json" <<'PY' || jo_die "$name: the summary does not say tasks are left"
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert s["status"] == "tasks-left" and s["tasks_left"] >= 1 and s["tasks_leased"] >= 1, s
PY
	grep -q "under another worker's lease" "$JO_T/dead-$name.err" || jo_die "$name: no line says what is left"
	sleep 5.5  # the dead worker's lease runs out
	echo "$name: a dead worker's lease: exit 0 (tasks-left), then taken over" >&2
}

# gc_check_refusals META: a volume with ChangeLog on is refused (exit 9)
# for --delete but reported in dry-run; usage errors exit 2.
gc_check_refusals() {
	local meta=$1 rc
	case $meta in sqlite3://*) ;; *) jo_die "gc_check_refusals: sqlite3 only" ;; esac
	python3 - "${meta#sqlite3://}" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
v = json.loads(db.execute("SELECT value FROM jfs_setting WHERE name='format'").fetchone()[0])
v["ChangeLog"] = True
db.execute("UPDATE jfs_setting SET value=? WHERE name='format'", (json.dumps(v),))
db.commit()
PY
	rc=0
	"$JO_BIN" gc "$meta" --delete >/dev/null 2>"$JO_T/changelog.err" || rc=$?
	[ $rc = 9 ] || jo_die "ChangeLog volume: exit $rc, expected 9"
	grep -q 'ChangeLog' "$JO_T/changelog.err" || jo_die "ChangeLog volume: no clear error"
	"$JO_BIN" gc "$meta" >/dev/null || jo_die "ChangeLog volume: the dry run failed"
	rc=0
	"$JO_BIN" gc "$meta" --plan --worker >/dev/null 2>&1 || rc=$?
	[ $rc = 2 ] || jo_die "--plan --worker: exit $rc, expected 2"
	rc=0
	"$JO_BIN" gc "$meta" --reset-tasks >/dev/null 2>&1 || rc=$?
	[ $rc = 2 ] || jo_die "--reset-tasks without --delete: exit $rc, expected 2"
}

# gc_bad_ref META BUCKET NAME (Redis): a delete batch in which one slice's
# count became unreadable after planning (HSET sliceRef F x). The worker
# re-reads every count of the batch before deleting (pipelined on Redis):
# that slice alone must fail (exit 4, "partial", its blocks kept, a warning
# naming it), the others are deleted and forgotten. Once the count says -1
# again, a new run finishes it and the volume ends clean.
gc_bad_ref() {
	local meta=$1 bucket=$2 name=$3
	local mp=$JO_T/mnt-$name field id rc=0 ref
	ref=$(gc_redis_key "$meta" sliceRef)
	jfs_format "$meta" "$bucket" "$name" --trash-days 0
	jfs_mount "$meta" "$mp" --no-bgjob --max-deletes 0
	python3 - "$mp" <<'PY'
import os, random, sys
r = random.Random(5)
for i in range(30):
    with open(os.path.join(sys.argv[1], "f%02d" % i), "wb") as f:
        f.write(r.randbytes(r.randrange(5000, 20000)))
PY
	rm -f "$mp"/f*
	jfs_umount "$mp"
	"$JO_BIN" gc "$meta" --plan --delete --json >"$JO_T/badref-plan.json" || jo_die "$name: plan failed"
	field=$(gc_redis_cli "$meta" HGETALL "$ref" | python3 -c '
import sys
v = sys.stdin.read().split()
neg = [k for k, c in zip(v[0::2], v[1::2]) if c.lstrip("-").isdigit() and int(c) < 0]
assert len(neg) >= 10, neg
print(sorted(neg)[len(neg) // 2])')
	id=${field#k}
	id=${id%%_*}
	gc_redis_cli "$meta" HSET "$ref" "$field" x >/dev/null
	gc_bucket_keys "$bucket" "$name" >"$JO_T/badref-before.txt"
	"$JO_BIN" gc "$meta" --worker --delete --json >"$JO_T/badref-work.json" 2>"$JO_T/badref-work.err" || rc=$?
	[ "$rc" = 4 ] || { cat "$JO_T/badref-work.err" >&2; jo_die "$name: expected exit 4 (partial), got $rc"; }
	grep -q "slice $id: .*not an integer" "$JO_T/badref-work.err" ||
		{ cat "$JO_T/badref-work.err" >&2; jo_die "$name: no warning names slice $id"; }
	gc_bucket_keys "$bucket" "$name" >"$JO_T/badref-after.txt"
	python3 - "$JO_T/badref-before.txt" "$JO_T/badref-after.txt" "$JO_T/badref-work.json" "$id" <<'PY' ||
import json, sys
before = set(open(sys.argv[1]).read().split())
after = set(open(sys.argv[2]).read().split())
s = json.loads(open(sys.argv[3]).read().splitlines()[-1])
sid = sys.argv[4]
mine = {k for k in before if k.rsplit("/", 1)[1].startswith(sid + "_")}
assert mine, "no block of slice %s before" % sid
assert after == mine, ("left", sorted(after), "expected", sorted(mine))
assert s["status"] == "partial" and s["errors"] >= 1, s
assert s["objects"] == len(before) - len(mine), (s["objects"], len(before), len(mine))
PY
		jo_die "$name: the unreadable count did not fail its slice alone"
	# the others' counts were forgotten; the bad one is still there
	[ "$(gc_redis_cli "$meta" HLEN "$ref")" = 1 ] || jo_die "$name: counts left: $(gc_redis_cli "$meta" HKEYS "$ref")"
	gc_redis_cli "$meta" HSET "$ref" "$field" -1 >/dev/null
	"$JO_BIN" gc "$meta" --delete --json >"$JO_T/badref-again.json" || jo_die "$name: the run after the repair failed"
	[ -z "$(gc_bucket_keys "$bucket" "$name")" ] || jo_die "$name: blocks left after the repair"
	gc_juicefs_gc "$meta" "$JO_T/gc-badref.log"
	[ "$(gc_count "$JO_T/gc-badref.log" pending)" = 0 ] && [ "$(gc_count "$JO_T/gc-badref.log" leaked)" = 0 ] ||
		jo_die "$name: juicefs gc finds pending or leaked objects after the repair"
	echo "$name: one unreadable count failed its slice alone, the rest of the batch went" >&2
}
