#!/usr/bin/env bash
# A Redis Sentinel failover never takes back what jfsops acted on (issue 26).
# The Sentinel set of the test bed (1 master, 1 replica, 3 sentinels on
# loopback); `SENTINEL FAILOVER` while jfsops works. For about 11 s the old
# master keeps taking writes that its demotion then throws away, and it
# reports no replica all the while: a write whose durability no replica
# confirmed must not be acted on (no block deleted after it), and the run
# must say so in its exit code.
#   - compact --apply --threads 1 (trash off) on hundreds of fragmented
#     files, failed over a second into the work, then failed back on a second
#     set of files: every file reads back with its sha256 through a fresh
#     mount and juicefs fsck finds nothing lost;
#   - gc --delete over an expired trash of hundreds of files (each unlink
#     followed by its blocks' deletion), failed over once the deletes have
#     started: every file, kept or still in the trash, reads back with its
#     sha256, fsck is clean, and a later gc run finishes the trash.
# Each round checks that the failover hit the run (at least one result was
# "not acted on") and that the exit code is honest: not 0 when an item failed
# (a compaction that stood but left its freed slices pending for gc is a
# warning). JO_FO_FILES files per set (default 150); JO_FO_PARTS="compact"
# or "gc" runs one part only.
# run_all: serial
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/../lib/engines.sh"
. "$here/lib/gc.sh"   # gc_age_trash
jo_setup

NFILES=${JO_FO_FILES:-150}
PARTS=" ${JO_FO_PARTS:-compact gc} "   # which parts run (both by default)

jo_sha() { sha256sum "$1" | cut -d' ' -f1; }

# fo_failover OLD: SENTINEL FAILOVER; prints the new master's port once the
# sentinels name it and it says it is a master.
fo_failover() {
	local old=$1 new= i
	set -- $JO_SENT_PORTS
	jo_sent_cli "$1" sentinel failover "$JO_RS_MASTER" | grep -q OK || jo_die "SENTINEL FAILOVER refused"
	for i in $(seq 1 300); do
		new=$(jo_rs_master)
		[ -n "$new" ] && [ "$new" != "$old" ] &&
			jo_rs_cli "$new" role 2>/dev/null | head -n 1 | grep -q master && break
		sleep 0.1
	done
	[ -n "$new" ] && [ "$new" != "$old" ] || jo_die "the failover from $old did not happen within 30 s"
	echo "$new"
}

# fo_settle OLD NEW: the old master is a replica of the new one again, in
# sync (the end state after a failover), so that nothing checked later can
# still change.
fo_settle() {
	local old=$1 new=$2 i
	for i in $(seq 1 600); do
		jo_rs_cli "$old" info replication 2>/dev/null | tr -d '\r' |
			grep -q "^master_port:$new$" &&
			jo_rs_cli "$old" info replication 2>/dev/null | tr -d '\r' | grep -q '^master_link_status:up' &&
			[ "$(jo_rs_cli "$new" info replication 2>/dev/null | tr -d '\r' | sed -n 's/^connected_slaves://p')" = 1 ] &&
			fo_sentinels_agree "$old" "$new" && return 0
		sleep 0.1
	done
	jo_die "$old never became a replica of $new (as the servers and every sentinel see it)"
}

# fo_sentinels_agree OLD NEW: every sentinel names NEW and has seen OLD report
# itself a replica of NEW, link up. A sentinel that last saw OLD as a master
# (it asks replicas every 10 s) would turn OLD back into a replica right after
# the next failover promotes it, before that failover's epoch reaches it (seen:
# -failover-abort-slave-timeout on the failback).
fo_sentinels_agree() {
	local old=$1 new=$2 s
	for s in $JO_SENT_PORTS; do
		[ "$(jo_sent_cli "$s" sentinel get-master-addr-by-name "$JO_RS_MASTER" 2>/dev/null | sed -n 2p)" = "$new" ] ||
			return 1
		jo_sent_cli "$s" sentinel replicas "$JO_RS_MASTER" 2>/dev/null | tr -d '\r' |
			awk -v port="$old" -v m="$new" '
				NR % 2 == 1 { k = $0; next }
				k == "port" { p = $0 }
				k == "flags" { f[p] = $0 }
				k == "role-reported" { r[p] = $0 }
				k == "master-link-status" { l[p] = $0 }
				k == "master-port" { mp[p] = $0 }
				END { exit !(f[port] == "slave" && r[port] == "slave" && l[port] == "ok" && mp[port] == m) }' ||
			return 1
	done
}

# fo_start_when FILE PATTERN PID WHAT: wait until FILE has a line matching
# PATTERN while PID runs (the work has started).
fo_start_when() {
	local file=$1 pat=$2 pid=$3 what=$4 i
	for i in $(seq 1 600); do
		grep -q "$pat" "$file" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || jo_die "$what ended before it did any work"
		sleep 0.05
	done
	jo_die "$what did no work within 30 s"
}

# fo_honest WHAT RC OUT ERR: the failover hit the run (something was not
# acted on), and the exit code is honest: not 0 when an item failed. gc
# fails the item (or stops) on every result it cannot confirm; compact fails
# the chunk whose commit it cannot confirm, while freed slices it cannot
# delete after a confirmed commit are only left pending for gc (a warning).
fo_honest() {
	local what=$1 rc=$2 out=$3 errf=$4 n failed
	n=$(cat "$out" "$errf" | grep -c 'not acted on' || true)
	echo "$what: exit $rc, $n line(s) saying 'not acted on', e.g.:" >&2
	cat "$out" "$errf" | grep -m 1 'not acted on' | cut -c1-400 >&2 || true
	[ "$n" -gt 0 ] || jo_die "$what: the failover did not hit the run (nothing was left unconfirmed)"
	failed=$(python3 - "$out" <<'PY'
import json, sys
n = 0
for l in open(sys.argv[1]):
    try:
        r = json.loads(l)
    except ValueError:
        continue
    if r.get("type") == "chunk" and r.get("result") == "failed":
        n += 1
    if r.get("type") == "summary" and r.get("command") == "gc":
        n += r["errors"] + (0 if r["complete"] else 1)
print(n)
PY
)
	[ "$failed" = 0 ] || [ "$rc" != 0 ] || jo_die "$what: exit 0 although $failed item(s) failed"
	[ "$failed" != 0 ] || grep -q 'stay pending' "$errf" ||
		jo_die "$what: 'not acted on' but no item failed and nothing was left pending"
}

# fo_fsck META WHAT: juicefs fsck finds every block.
fo_fsck() {
	"$JUICEFS" fsck "$1" --no-agent >"$JO_T/fsck-$2.log" 2>&1 || {
		grep -m 3 "can't find block" "$JO_T/fsck-$2.log" >&2 || true
		grep -m 1 'objects are lost' "$JO_T/fsck-$2.log" >&2 || true
		jo_die "$2: juicefs fsck failed"
	}
}

# fo_mount META MP: a fresh mount to read back through (a missing block fails
# the read at once instead of after ten retries).
fo_mount() { jfs_mount "$1" "$2" --no-bgjob --io-retries 1; }

# fo_verify MP MIRROR: every file of MIRROR reads back the same under MP.
fo_verify() {
	local mp=$1 mir=$2 n=0 f
	for f in "$mir"/*; do
		n=$((n + 1))
		[ "$(jo_sha "$mp/${f##*/}" 2>/dev/null)" = "$(jo_sha "$f")" ] ||
			jo_die "$mp/${f##*/} reads back wrong (file $n of $(ls "$mir" | wc -l))"
	done
	echo "$n files read back the same" >&2
}

e=redis-sentinel
engine_start $e

# ---------------------------------------------------------------- compact

if [[ $PARTS == *" compact "* ]]; then
engine_meta $e fo_compact
engine_store $e fo-compact
meta=$JO_META name=fo-compact mp=$JO_T/mnt-fo-compact
jfs_format "$meta" "$JO_BUCKET" "$name" --trash-days 0
jfs_mount "$meta" "$mp" --no-bgjob
# two sets of fragmented files (one per round): each an initial write and
# then overwrites at random offsets, each fsync'ed (one slice each)
python3 - "$mp" "$JO_T/mirror-$name" "$NFILES" <<'PY'
import os, random, sys
from multiprocessing import Pool
mp, mir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def one(job):
    d, i = job
    r = random.Random(i * 7 + len(d))
    size = r.randrange(64 << 10, 320 << 10)
    fds = [os.open(os.path.join(mp, d, "f%04d" % i), os.O_CREAT | os.O_RDWR, 0o644),
           os.open(os.path.join(mir, d, "f%04d" % i), os.O_CREAT | os.O_RDWR, 0o644)]
    data = r.randbytes(size)
    for fd in fds: os.pwrite(fd, data, 0)
    os.fsync(fds[0])
    for _ in range(5):
        off = r.randrange(0, size)
        data = r.randbytes(r.randrange(1, 48 << 10))
        for fd in fds: os.pwrite(fd, data, off)
        os.fsync(fds[0])
    for fd in fds: os.close(fd)
for d in ("r1", "r2"):
    os.makedirs(os.path.join(mp, d)); os.makedirs(os.path.join(mir, d))
with Pool(4) as p:
    p.map(one, [(d, i) for d in ("r1", "r2") for i in range(n)], chunksize=8)
PY
jfs_umount "$mp"
recs=$("$JO_BIN" info "$meta" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_records_per_chunk"])')
[ "$recs" -ge 5 ] || jo_die "$name: expected fragmented chunks, the most records is $recs"
echo "$name: $((2 * NFILES)) fragmented files written (${SECONDS}s)" >&2

for round in r1 r2; do
	old=$(jo_rs_master)
	out=$JO_T/compact-$round.json errf=$JO_T/compact-$round.err
	"$JO_BIN" compact "$meta" --apply --threads 1 --path "/$round" --json \
		--audit "$JO_T/audit-compact-$round.jsonl" >"$out" 2>"$errf" &
	pid=$!
	fo_start_when "$out" '"type":"chunk"' "$pid" "compact $round"
	sleep 1
	kill -0 "$pid" 2>/dev/null || jo_die "compact $round: finished before the failover (too little work)"
	d0=$(grep -c '"type":"chunk"' "$out" || true)
	new=$(fo_failover "$old")
	d1=$(grep -c '"type":"chunk"' "$out" || true)
	kill -0 "$pid" 2>/dev/null || jo_die "compact $round: finished before the new master was named"
	echo "compact $round: $d0 chunks done at the failover, $d1 when $new was named" >&2
	rc=0
	wait "$pid" || rc=$?
	echo "compact $round (${SECONDS}s): failover $old -> $new; $(tail -n 1 "$out" | cut -c1-300)" >&2
	# 4: chunks failed (not acted on); 10: a lease taken in the failover's window was lost
	case $rc in 0 | 4 | 10) ;; *) tail -n 5 "$errf" >&2; jo_die "compact $round: exit $rc" ;; esac
	fo_settle "$old" "$new"
	fo_fsck "$meta" "$name-$round"
	fo_mount "$meta" "$mp"
	fo_verify "$mp/$round" "$JO_T/mirror-$name/$round"
	jfs_umount "$mp"
	fo_honest "compact $round" "$rc" "$out" "$errf"
done
echo "redis_failover_compact: compact ok (${SECONDS}s)" >&2
fi

# ---------------------------------------------------------------- gc (an expired trash)

if [[ $PARTS == *" gc "* ]]; then
engine_meta $e fo_gc
engine_store $e fo-gc
meta=$JO_META name=fo-gc mp=$JO_T/mnt-fo-gc mir=$JO_T/mirror-fo-gc
jfs_format "$meta" "$JO_BUCKET" "$name" --trash-days 1
jfs_mount "$meta" "$mp" --no-bgjob
mkdir -p "$mir"
python3 - "$mp" "$mir" "$NFILES" <<'PY'
import os, random, sys
from multiprocessing import Pool
mp, mir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def one(i):
    r = random.Random(i)
    data = r.randbytes(r.randrange(1, 200 << 10))
    for d in (mp, mir):
        with open(os.path.join(d, "g%04d" % i), "wb") as f:
            f.write(data)
with Pool(4) as p:
    p.map(one, range(2 * n), chunksize=16)
PY
# half of them go to the trash; what they hold, as read through the mount
for i in $(seq 0 2 $((2 * NFILES - 1))); do
	f=$(printf 'g%04d' "$i")
	rm "$mp/$f" "$mir/$f"
done
(cd "$mp/.trash" && find . -type f -exec sha256sum {} +) | sed 's| \./[^/]*/| |' >"$JO_T/trash-$name.sha"
[ "$(wc -l <"$JO_T/trash-$name.sha")" = "$NFILES" ] || jo_die "$name: expected $NFILES files in the trash"
jfs_umount "$mp"
old=$(jo_rs_master)
# expire the trash (its hour directories three days back)
REDISCLI_AUTH=$JO_RS_PASS gc_age_trash "redis://127.0.0.1:$old/${meta##*/}" $((3 * 86400))

out=$JO_T/gc.json errf=$JO_T/gc.err
# slow (20 deletes a second, a DeleteObjects call each 10 keys) and ended by
# --max-time before the old master is demoted (about 12 s in): a gc that
# went on would find entries whose unlink the demotion took back in the trash
# again and redo them, hiding a loss the run had already caused
"$JO_BIN" gc "$meta" --delete --batch 10 --delete-rate 20 --max-time 9s \
	--audit "$JO_T/audit-gc.jsonl" --json >"$out" 2>"$errf" &
pid=$!
fo_start_when "$JO_T/audit-gc.jsonl" '"action":"delete"' "$pid" "gc"
new=$(fo_failover "$old")
kill -0 "$pid" 2>/dev/null || jo_die "gc: finished before the new master was named (too little work)"
rc=0
wait "$pid" || rc=$?
echo "gc (${SECONDS}s): failover $old -> $new; $(tail -n 1 "$out" | cut -c1-300)" >&2
# 4: items failed (not acted on); 5: stopped on one; 10: a lease lost in the window
case $rc in 0 | 4 | 5 | 10) ;; *) tail -n 5 "$errf" >&2; jo_die "gc: exit $rc" ;; esac
fo_settle "$old" "$new"
fo_fsck "$meta" "$name"
fo_mount "$meta" "$mp"
fo_verify "$mp" "$mir"
# every file still in the trash reads back as it was
(cd "$mp/.trash" && find . -type f -exec sha256sum {} +) 2>"$JO_T/trash-read.err" |
	sed 's| \./[^/]*/| |' | sort >"$JO_T/trash-after-$name.sha" ||
	{ head -n 5 "$JO_T/trash-read.err" >&2; jo_die "$name: files in the trash cannot be read back"; }
sort "$JO_T/trash-$name.sha" | comm -13 - "$JO_T/trash-after-$name.sha" >"$JO_T/trash-diff-$name" || true
[ ! -s "$JO_T/trash-diff-$name" ] ||
	{ head -n 5 "$JO_T/trash-diff-$name" >&2; jo_die "$name: files in the trash read back wrong"; }
echo "$name: the $(wc -l <"$JO_T/trash-after-$name.sha") files still in the trash read back the same" >&2
jfs_umount "$mp"
fo_honest gc "$rc" "$out" "$errf"
# what the failover left, a later run finishes
"$JO_BIN" gc "$meta" --delete >"$JO_T/gc-final.log" 2>&1 || { tail -n 5 "$JO_T/gc-final.log" >&2; jo_die "gc: the final run failed"; }
fo_fsck "$meta" "$name-final"
fo_mount "$meta" "$mp"
[ -z "$(find "$mp/.trash" -type f | head -n 1)" ] || jo_die "$name: files left in the trash after the final run"
fo_verify "$mp" "$mir"
jfs_umount "$mp"
echo "redis_failover_compact: gc ok (${SECONDS}s)" >&2
fi
echo "redis_failover_compact: ok"
