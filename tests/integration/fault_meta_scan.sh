#!/usr/bin/env bash
# tests/integration/fault_meta_scan.sh: no metadata scan that feeds a decision
# is taken as whole unless it was read whole. The same volume and the same
# checks for each engine (FAULT_ENGINES, default "redis sqlite postgres mysql
# etcd"):
#
#   redis   jfsops talks to Redis through Toxiproxy. The connection is cut
#           after N bytes (N = half of what a clean run of the same command
#           reads, so the cut lands inside its scans), stalled and closed,
#           or the real server answers BUSY (a long EVAL from redis-cli) and
#           LOADING (DEBUG RELOAD of a slowly loaded dataset).
#   postgres, mysql (MariaDB), etcd
#           the server behind Toxiproxy, the same way: the connection cut
#           after half the bytes a clean run reads, reset (RST) mid-scan, and
#           stalled for good mid-scan (no byte comes back, the connection
#           stays open), which only the driver's own timeout ends: libpq's
#           reply wait (60 s), MariaDB Connector/C's read timeout (the
#           META-URL sets readTimeout=5s, as a go-sql-driver DSN would, so
#           that the wait stays short here), etcd's request timeout (60 s).
#           One stall per engine (leakcheck's reference scan): each costs
#           the driver's whole timeout.
#   sqlite  another process (the sqlite3 CLI) holds BEGIN EXCLUSIVE. The lock
#           is taken after jfsops has read the volume, while it is parked on
#           a FIFO (its report file, its candidates file, its audit file)
#           right before or in the middle of its scans. JuiceFS formats its
#           SQLite volumes in WAL mode, where a BEGIN EXCLUSIVE does not keep
#           readers out and where every open connection holds a shared lock
#           that keeps even locking_mode=EXCLUSIVE out; so for these runs the
#           database is switched to the rollback journal (journal_mode
#           DELETE, as older or hand-made databases are), and back to WAL
#           before the reruns.
#
# Each faulted run must: delete nothing (bucket and metadata unchanged), plan
# nothing from the cut scan (gc: no task item of that scan's kind recorded),
# say INCOMPLETE, print "complete": false in its --json summary, leave no
# report, and exit 5 (a server unreachable, timed out, LOADING/BUSY, locked)
# - except gc on a locked SQLite, which may count the item it could not read
# as failed (exit 4) and go on once the lock is gone. A stalled run must end
# by its driver's timeout, never hang. Then, with the fault removed, the
# reruns must be exact: leakcheck finds exactly the planted leaks,
# --delete-from deletes exactly them, gc --delete leaves juicefs gc with
# nothing leaked or pending, juicefs fsck clean, every file's sha256
# unchanged and the bucket holding exactly the referenced blocks.
#
# juicefs (format, mount, gc, fsck) and the test's own readers
# (tests/tools/sqlmeta.py, kvmeta.py, redis-cli) always talk to the server
# directly; only jfsops goes through the proxy.
#
# Ports: JO_PORT_BASE+0 redis, +1 toxiproxy API, +2 the redis proxy, +3 the
# postgres proxy, +4 the mysql proxy, +5 the etcd proxy, +24 postgres, +25
# mariadb, +26/+27 etcd (tests/lib/engines.sh), +30..+50 juicefs metrics.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/../lib/engines.sh"
. "$here/lib/gc.sh"
jo_setup
J=$JO_BIN
[ -x "$J" ] || jo_die "$J not built"
ENGINES=${FAULT_ENGINES:-redis sqlite postgres mysql etcd}
export JO_GC_FILES=${FAULT_FILES:-400}
FAILS=0
ok() { echo "ok   - $*"; }
bad() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
PY=$JO_VENV/bin/python

# summary_field FILE FIELD: FIELD of the last JSON line of FILE whose type is summary.
summary_field() {
	"$PY" - "$1" "$2" <<'PY'
import json, sys
v = None
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if isinstance(r, dict) and r.get("type") == "summary":
        v = r.get(sys.argv[2], "<absent>")
print(json.dumps(v) if not isinstance(v, str) else v)
PY
}

# expect_incomplete WHAT RC WANT OUT ERR: the run failed as a cut scan must.
expect_incomplete() {
	local what=$1 rc=$2 want=$3 out=$4 err=$5 c
	case " $want " in *" $rc "*) ok "$what: exit $rc" ;;
	*) bad "$what: exit $rc, want $want"; sed 's/^/    /' "$err" | tail -5 ;; esac
	c=$(summary_field "$out" complete)
	[ "$c" = false ] && ok "$what: summary says complete: false" ||
		bad "$what: summary complete is '$c', want false"
	grep -q INCOMPLETE "$err" && ok "$what: says INCOMPLETE" || bad "$what: no INCOMPLETE line"
}

# at_the_cut WHAT ERR: the run failed at the request whose reply was cut, not
# at a later one sent on the connection already lost (the driver's words for
# that mean an earlier cut went unnoticed: a reply taken whole that was not).
# Warnings are left out: gc counts its tasks for the summary after a failed
# plan, on whatever connection it has.
at_the_cut() {
	local re
	case $E in
	mysql) re='gone away' ;; # CR_SERVER_GONE_ERROR: a command sent on a dead link
	postgres) re='no connection to the server' ;;
	*) return 0 ;;
	esac
	if grep -v ': warning: ' "$2" | grep -qi "$re"; then
		bad "$1: a request went out on a connection already lost: $(grep -v ': warning: ' "$2" | grep -m1 -i "$re" | head -c 300)"
	else
		ok "$1: failed at the reply that was cut"
	fi
}

# state_snapshot TAG: what a faulted run must not change: the bucket's keys
# and what juicefs gc counts.
state_snapshot() {
	gc_bucket_keys "$BUCKET" "$NAME" >"$JO_T/keys-$1"
	gc_juicefs_gc "$META" "$JO_T/gc-$1.log"
	"$PY" "$GCTOOL" gcline "$JO_T/gc-$1.log" >"$JO_T/gcline-$1"
}
expect_unchanged() {
	local what=$1 tag=$2
	gc_bucket_keys "$BUCKET" "$NAME" | cmp -s - "$JO_T/keys-$tag" &&
		ok "$what: no object deleted" || bad "$what: objects were deleted"
	gc_juicefs_gc "$META" "$JO_T/gc-check.log"
	[ "$("$PY" "$GCTOOL" gcline "$JO_T/gc-check.log")" = "$(cat "$JO_T/gcline-$tag")" ] &&
		ok "$what: metadata unchanged (juicefs gc counts)" || bad "$what: metadata changed"
}

# task_items KIND: how many gc task items of KIND (f s d c t) are recorded
# (read from the server directly, by each engine's own reader).
task_items() {
	case $META in
	redis://*) gc_redis_cli "$META" HKEYS jfsops:gc:items | { grep -c "^$1:" || true; } ;;
	sqlite3://* | postgres://* | mysql://*) "$PY" "$JO_REPO/tests/tools/sqlmeta.py" gc-items "$META" "$1" ;;
	etcd://*) "$PY" "$JO_REPO/tests/tools/kvmeta.py" gc-items "$META" "$1" ;;
	*) jo_die "task_items: no reader for $META" ;;
	esac
}

# the scan a plan error names -> the item kind it records
scan_kind() {
	case $(cat "$1") in
	*"plan: removed files"*) echo f ;;
	*"plan: slice references"*) echo s ;;
	*"plan: delayed slices"*) echo d ;;
	*"plan: leaked chunks"*) echo c ;;
	*"plan: trash"*) echo t ;;
	*) echo none ;;
	esac
}

# ---- faults

# An engine behind the proxy ($PROXY): cut every connection through it
# after half of what a clean run of the same command reads.
cut_at_half() { # CMD...
	local b0 b1
	toxi_clear "$PROXY"
	b0=$(toxi_bytes "$PROXY")
	"$@" >/dev/null 2>&1 || true
	b1=$(toxi_bytes "$PROXY")
	RUN_BYTES=$((b1 - b0))
	CUT=$((RUN_BYTES / 2))
	[ "$CUT" -gt 2048 ] || jo_die "calibration: only $((b1 - b0)) bytes through the proxy"
	toxi_limit_data "$PROXY" cut "$CUT"
}

# SQLite: lock the database out of readers until sqlite_unlock. With a PID
# (a command stopped with SIGSTOP, maybe inside a read): the locker first
# asks for its lock (SQLite gives it PENDING, which admits no new reader),
# then PID goes on, and its next read finds the database locked.
sqlite_lock() {
	local cont=${1:-}
	# the last lock's "locked" must not be read for this one's: the new
	# locker's output file may not be opened (truncated) yet when we look
	rm -f "$JO_T/locker.out"
	mkfifo "$JO_T/lockctl"
	(
		exec 3<"$JO_T/lockctl"
		{
			printf '.timeout 60000\nBEGIN EXCLUSIVE;\n'
			printf 'SELECT count(*) FROM jfs_setting;\nSELECT '"'"'locked'"'"';\n'
			cat <&3 # until sqlite_unlock writes
			printf 'COMMIT;\n'
		} | sqlite3 "${META#sqlite3://}" >"$JO_T/locker.out" 2>&1
	) &
	LOCKER=$!
	exec 4>"$JO_T/lockctl"
	local i
	if [ -n "$cont" ]; then
		sleep 0.5
		kill -CONT "$cont" 2>/dev/null || true
	fi
	for i in $(seq 1 300); do
		grep -q '^locked$' "$JO_T/locker.out" 2>/dev/null && return 0
		sleep 0.1
	done
	cat "$JO_T/locker.out" >&2
	jo_die "sqlite3 did not get its exclusive lock"
}
sqlite_unlock() {
	echo >&4
	exec 4>&-
	wait "$LOCKER" || true
	rm -f "$JO_T/lockctl"
}
# is the database still locked out of readers? (the fault really held)
sqlite_is_locked() {
	! "$PY" -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1], timeout=0.2).execute("SELECT 1 FROM jfs_setting").fetchall()' \
		"${META#sqlite3://}" 2>/dev/null
}

# park_wait PID WCHAN-REGEX: until a thread of PID sleeps in a matching kernel
# function (wait_for_partner: open() of a FIFO; pipe_write: a full FIFO).
park_wait() {
	local pid=$1 re=$2 i t
	for i in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || jo_die "the parked command exited early"
		for t in /proc/"$pid"/task/*; do
			grep -Eqs "$re" "$t/wchan" && return 0
		done
		sleep 0.05
	done
	jo_die "the command never parked on its FIFO ($re)"
}

# stop_point CMD...: "SYSCALL N TOTAL" for strace's inject=SYSCALL:when=N, from
# one whole (calibration) run of CMD. With MIDWAY_MARK: the first fcntl the
# main thread makes after it opens a path containing the mark (the report file
# is created just before the reference scan, whose first transaction starts by
# taking SQLite's shared lock with fcntl: stopped on entry to that call, CMD
# holds no lock, and the scan is what finds the database locked). Without a
# mark: the pread64 halfway through the whole run's reads of the database.
stop_point() {
	if [ -n "${MIDWAY_MARK:-}" ]; then
		strace -f -e trace=fcntl,openat -o "$JO_T/calib.txt" "$@" >/dev/null 2>&1 || true
		awk -v mark="$MIDWAY_MARK" '
			NR == 1 { main = $1 }
			$1 != main { next }
			/ fcntl\(/ { n++ }
			!seen && / openat\(/ && index($0, mark) { seen = 1; at = n + 1 }
			END { print "fcntl", (seen ? at : 0), n + 0 }' "$JO_T/calib.txt"
	else
		strace -f -c -e trace=pread64 -o "$JO_T/calib.txt" "$@" >/dev/null 2>&1 || true
		awk '$NF == "pread64" { t = $4 } END { print "pread64", int(t / 2), t + 0 }' "$JO_T/calib.txt"
	fi
}

# rollback_journal: the SQLite database in the rollback journal mode, where
# sqlite_lock's lock keeps every other connection out.
rollback_journal() {
	[ "$(sqlite3 "${META#sqlite3://}" 'PRAGMA journal_mode=DELETE;')" = delete ] ||
		jo_die "cannot switch $META to the rollback journal"
}

# unlock_after NAME HOLD PID: with the lock taken while PID (the run NAME)
# goes on, release it at the run's end (HOLD=end, checking that it held) or
# HOLD seconds later; the run's exit code goes to $JO_T/NAME.rc.
unlock_after() {
	local name=$1 hold=$2 pid=$3 rc=0
	if [ "$hold" = end ]; then
		wait "$pid" || rc=$?
		sqlite_is_locked && ok "$name: the database was still locked when the run ended" ||
			bad "$name: the lock did not hold for the whole run"
		sqlite_unlock
	else
		sleep "$hold"
		sqlite_unlock
		wait "$pid" || rc=$?
	fi
	echo "$rc" >"$JO_T/$name.rc"
}

# run_midway NAME HOLD CMD...: run CMD (exit code in $JO_T/NAME.rc) under
# strace, which stops it (SIGSTOP) at the call stop_point finds; the lock is
# taken there and the command goes on; the lock is released at its end
# (HOLD=end) or HOLD seconds later. Every file CMD writes is created under a
# random name and renamed (common/file.h), so no FIFO can stand in for one to
# park it: the count of its calls does.
# MIDWAY_CLEAN: a file the whole (counting) run wrote, removed after it.
run_midway() {
	local name=$1 hold=$2 sc at total sp pid i
	shift 2
	rollback_journal
	read -r sc at total < <(stop_point "$@")
	[ -z "${MIDWAY_CLEAN:-}" ] || rm -f "$MIDWAY_CLEAN"
	[ "${at:-0}" -ge 1 ] && [ "${total:-0}" -ge 10 ] ||
		jo_die "calibration: no stop point in a whole run of $name ($sc ${at:-0} of ${total:-0}, mark '${MIDWAY_MARK:-}')"
	strace -f -o "$JO_T/$name.strace" -e trace="$sc" -e inject="$sc":signal=SIGSTOP:when="$at" -- \
		"$@" >"$JO_T/$name.out" 2>"$JO_T/$name.err" &
	sp=$!
	pid=
	local held=0 state states= comm
	comm=$(basename "$1" | cut -c1-15) # the kernel's comm: 15 bytes
	# stopped: in a tracing stop for 0.3 s on end (strace stops it for a
	# moment at every traced call too; the injected SIGSTOP lasts)
	for i in $(seq 1 1200); do
		# the command, by name: strace's first child is a probe of its own
		# that stops itself and exits at once
		[ -n "$pid" ] || pid=$(pgrep -P "$sp" -x "$comm" | head -n 1 || true)
		state=
		[ -z "$pid" ] || state=$(awk '{print $3}' /proc/"$pid"/stat 2>/dev/null || true)
		case " $states " in *" ${state:--} "*) ;; *) states="$states ${state:--}" ;; esac
		if [ "$state" = t ]; then
			held=$((held + 1))
			[ "$held" -ge 6 ] && break
		else
			held=0
		fi
		kill -0 "$sp" 2>/dev/null || jo_die "$name finished before its $sc call $at of $total"
		sleep 0.05
	done
	if [ "$held" -lt 6 ]; then
		# what it was doing: the states seen, its threads' wait channels, its last calls
		echo "$name: pid ${pid:-none}, states seen:$states" >&2
		[ -z "$pid" ] || for t in /proc/"$pid"/task/*; do
			echo "  thread ${t##*/}: $(awk '{print $3}' "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)" >&2
		done
		grep -c " $sc(" "$JO_T/$name.strace" >&2 || true
		tail -n 15 "$JO_T/$name.strace" >&2 || true
		tail -n 5 "$JO_T/$name.err" >&2 || true
		jo_die "$name: not stopped at its $sc call $at of $total"
	fi
	[ -n "$pid" ] || jo_die "$name: no process under strace"
	echo "$name: stopped at $sc call $at of $total" >&2
	sqlite_lock "$pid"
	unlock_after "$name" "$hold" "$sp"
}

# run_parked NAME MODE FIFO HOLD CMD...: run CMD (exit code in $JO_T/NAME.rc)
# until it is parked on FIFO, take the lock there, let it go on, release the
# lock at its end (HOLD=end) or HOLD seconds later. MODE says how CMD meets
# the FIFO: open-write (CMD opens it to write: parked in open, then a reader
# comes), open-read:FILE (CMD opens it to read: parked in open, then FILE is
# written in), write (CMD writes into it: a holder keeps a 4 KiB pipe open
# without reading, so CMD parks in a write, then the holder drains it).
run_parked() {
	local name=$1 mode=$2 fifo=$3 hold=$4 feeder=
	shift 4
	# juicefs (gc, fsck) puts the database back into WAL mode when it opens it
	rollback_journal
	mkfifo "$fifo"
	if [ "$mode" = write ]; then
		"$PY" - "$fifo" "$JO_T/$name.ctl" <<'PY' &
import fcntl, os, sys, time
fifo, ctl = sys.argv[1], sys.argv[2]
fd = os.open(fifo, os.O_RDWR)            # a reader that is not reading (yet)
fcntl.fcntl(fd, 1031, 4096)              # F_SETPIPE_SZ: a small pipe fills fast
open(ctl + ".ready", "w").close()
while not os.path.exists(ctl + ".drain"):
    time.sleep(0.02)
os.set_blocking(fd, False)
while not os.path.exists(ctl + ".stop"):
    try:
        os.read(fd, 1 << 16)
    except BlockingIOError:
        time.sleep(0.01)
PY
		feeder=$!
		local i
		for i in $(seq 1 100); do [ -e "$JO_T/$name.ctl.ready" ] && break; sleep 0.05; done
	fi
	"$@" >"$JO_T/$name.out" 2>"$JO_T/$name.err" &
	local pid=$!
	case $mode in
	write) park_wait "$pid" pipe_write ;;
	*) park_wait "$pid" wait_for_partner ;;
	esac
	sqlite_lock
	case $mode in
	open-write) cat "$fifo" >/dev/null & feeder=$! ;;
	open-read:*) cat "${mode#open-read:}" >"$fifo" & feeder=$! ;;
	write) touch "$JO_T/$name.ctl.drain" ;;
	esac
	unlock_after "$name" "$hold" "$pid"
	touch "$JO_T/$name.ctl.stop"
	wait "$feeder" 2>/dev/null || true
	rm -f "$fifo"
}

# ---- leaks

plant_leaks() {
	jfs_dump "$META" "$JO_T/dump-plant.json"
	local next maxid id
	next=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["Counters"]["nextChunk"])' "$JO_T/dump-plant.json")
	maxid=$(gc_bucket_keys "$BUCKET" "$NAME" | sed 's,.*/,,; s,_.*,,' | sort -n | tail -1)
	[ $((maxid + 4)) -lt "$next" ] || jo_die "no free slice ids below the counter ($maxid, $next)"
	: >"$JO_T/leaks.txt"
	for id in $((maxid + 1)) $((maxid + 2)) $((maxid + 3)); do
		local key=$NAME/chunks/$((id / 1000000))/$((id / 1000))/${id}_0_1000
		mkdir -p "$(dirname "$BUCKET/$key")"
		head -c 1000 /dev/urandom >"$BUCKET/$key"
		touch -d '3 hours ago' "$BUCKET/$key"
		echo "$key" >>"$JO_T/leaks.txt"
	done
	sort -o "$JO_T/leaks.txt" "$JO_T/leaks.txt"
}

leaks_present() {
	local k n=0
	while read -r k; do [ -e "$BUCKET/$k" ] && n=$((n + 1)); done <"$JO_T/leaks.txt"
	echo $n
}

# ---- one engine

run_engine() {
	local E=$1 rc
	NAME=fm$E
	BUCKET=$JO_T/bucket-$E
	MP=$JO_T/mnt-$E
	engine_up "$E"
	echo "== $E: $META (jfsops through $FMETA)"
	gc_populate "$META" "$BUCKET" "$NAME" 0 "$MP"
	plant_leaks
	state_snapshot start

	# -- 1. leakcheck's reference scan
	local LK=("$J" leakcheck "$FMETA" --min-age 1h --json)
	case $E in
	sqlite)
		# stopped just before its reference scan takes its first lock (the
		# report file is created right before that scan), the lock taken
		# there and held to its end
		MIDWAY_MARK=rep1.jsonl MIDWAY_CLEAN=$JO_T/rep1.jsonl run_midway lk1 end "${LK[@]}" --out "$JO_T/rep1.jsonl"
		rc=$(cat "$JO_T/lk1.rc")
		grep -q "locked" "$JO_T/lk1.err" && ok "leakcheck locked: the error says locked" ||
			bad "leakcheck locked: $(head -c 300 "$JO_T/lk1.err")"
		;;
	*)
		cut_at_half "${LK[@]}"
		rc=0
		"${LK[@]}" --out "$JO_T/rep1.jsonl" >"$JO_T/lk1.out" 2>"$JO_T/lk1.err" || rc=$?
		toxi_clear "$PROXY"
		in_scan "leakcheck cut after $CUT of $RUN_BYTES bytes" "$JO_T/lk1.err"
		at_the_cut "leakcheck cut" "$JO_T/lk1.err"
		;;
	esac
	expect_incomplete "leakcheck, $E scan cut" "$rc" 5 "$JO_T/lk1.out" "$JO_T/lk1.err"
	[ ! -e "$JO_T/rep1.jsonl" ] && [ ! -e "$JO_T/rep1.jsonl.tmp" ] &&
		ok "leakcheck cut: no report left" || bad "leakcheck cut: a report was left"

	case $E in
	redis) redis_busy_loading_stall ;;
	sqlite) ;;
	*) proxy_reset_stall ;;
	esac

	# -- 2. the clean check: exactly the planted leaks
	rc=0
	"${LK[@]}" --out "$JO_T/rep.jsonl" >"$JO_T/lk.out" 2>"$JO_T/lk.err" || rc=$?
	[ $rc = 1 ] && ok "leakcheck clean run: exit 1" || bad "leakcheck clean run: exit $rc"
	[ "$(summary_field "$JO_T/lk.out" complete)" = true ] && ok "leakcheck clean run: complete" ||
		bad "leakcheck clean run: not complete"
	"$PY" -c '
import json, sys
got = sorted(r["key"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "leaked")
want = sorted(l.strip() for l in open(sys.argv[2]))
miss = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "missing"]
sys.exit(0 if got == want and not miss else "leaked %s missing %d, want %s" % (got, len(miss), want))' \
		"$JO_T/rep.jsonl" "$JO_T/leaks.txt" && ok "leakcheck clean run: exactly the planted leaks" ||
		bad "leakcheck clean run: wrong report"

	# -- 3. --delete-from: its re-check scan is cut
	local LD=("$J" leakcheck "$FMETA" --min-age 1h --json --audit "$JO_T/audit-$E.jsonl")
	case $E in
	sqlite)
		# parked reading its candidates from a FIFO: the lock is in place
		# before the re-check scan reads anything
		run_parked ld1 "open-read:$JO_T/rep.jsonl" "$JO_T/cands.fifo" end "${LD[@]}" \
			--delete-from "$JO_T/cands.fifo"
		rc=$(cat "$JO_T/ld1.rc")
		;;
	*)
		cut_at_half "$J" leakcheck "$FMETA" --min-age 1h --delete-from "$JO_T/rep.jsonl" --dry-run
		rc=0
		"${LD[@]}" --delete-from "$JO_T/rep.jsonl" >"$JO_T/ld1.out" 2>"$JO_T/ld1.err" || rc=$?
		toxi_clear "$PROXY"
		at_the_cut "--delete-from cut" "$JO_T/ld1.err"
		;;
	esac
	expect_incomplete "leakcheck --delete-from, $E re-check cut" "$rc" 5 "$JO_T/ld1.out" "$JO_T/ld1.err"
	[ "$(leaks_present)" = 3 ] && ok "--delete-from cut: the leaks are all still there" ||
		bad "--delete-from cut: $(leaks_present) of 3 leaks left"
	[ "$(summary_field "$JO_T/ld1.out" deleted)" = 0 ] && ok "--delete-from cut: summary says 0 deleted" ||
		bad "--delete-from cut: summary deleted $(summary_field "$JO_T/ld1.out" deleted)"
	expect_unchanged "leakcheck faults" start

	# -- 4. gc's plan scans (dry run, --plan --delete, plan+work --delete)
	case $E in
	sqlite) gc_sqlite_lock ;;
	*) gc_proxy_cuts ;;
	esac

	# -- 5. reruns without faults finish the job
	if [ "$E" = sqlite ]; then
		[ "$(sqlite3 "${META#sqlite3://}" 'PRAGMA journal_mode=WAL;')" = wal ] ||
			jo_die "cannot switch $META back to WAL"
	fi
	rc=0
	"${LD[@]}" --delete-from "$JO_T/rep.jsonl" >"$JO_T/ld.out" 2>"$JO_T/ld.err" || rc=$?
	[ $rc = 0 ] && [ "$(summary_field "$JO_T/ld.out" deleted)" = 3 ] && [ "$(leaks_present)" = 0 ] &&
		ok "--delete-from rerun: exactly the 3 leaks deleted" ||
		bad "--delete-from rerun: exit $rc, $(summary_field "$JO_T/ld.out" deleted) deleted, $(leaks_present) left"
	rc=0
	"$J" gc "$FMETA" --delete --json >"$JO_T/gc-final.out" 2>"$JO_T/gc-final.err" || rc=$?
	[ $rc = 0 ] && [ "$(summary_field "$JO_T/gc-final.out" complete)" = true ] &&
		ok "gc --delete rerun: exit 0, complete" || { bad "gc --delete rerun: exit $rc"; tail -5 "$JO_T/gc-final.err"; }
	gc_check_end "$META" "$BUCKET" "$NAME" "$MP"
	ok "$E: end state: juicefs gc clean, fsck clean, bucket == referenced blocks, sha256 unchanged"
}

# slow_scan: throttle the proxy so the command calibrated last takes about
# 8 s (its scans are then in progress when a fault comes 2-3 s in).
slow_scan() {
	local kbs=$((RUN_BYTES / 8 / 1024))
	[ "$kbs" -ge 1 ] || kbs=1
	toxi_bandwidth "$PROXY" slow "$kbs"
}

# in_scan WHAT ERR: the failure came from inside a scan, not at the start.
in_scan() {
	grep -q "scan " "$2" && ok "$1: failed inside the reference scan" ||
		bad "$1: did not fail inside a scan: $(head -c 300 "$2")"
}

# disturbed_scan N PID: leakcheck's slowed scan (lkN.out, lkN.err, repN.jsonl)
# while the background job PID disturbs it; then the proxy is clean again.
# Sets RC to leakcheck's exit code.
disturbed_scan() {
	RC=0
	"$J" leakcheck "$FMETA" --min-age 1h --json --out "$JO_T/rep$1.jsonl" >"$JO_T/lk$1.out" 2>"$JO_T/lk$1.err" || RC=$?
	wait "$2" || true
	toxi_clear "$PROXY"
}

# failed_in_scan WHAT N TAG: the disturbed run N failed as a cut scan must,
# from inside the scan, and left no report.
failed_in_scan() {
	expect_incomplete "leakcheck, $1" "$RC" 5 "$JO_T/lk$2.out" "$JO_T/lk$2.err"
	in_scan "$3" "$JO_T/lk$2.err"
	[ ! -e "$JO_T/rep$2.jsonl" ] || bad "$3: a report was left"
}

# server_reply N REPLY: the real server's REPLY reached the disturbed run N.
server_reply() {
	grep -q "$2" "$JO_T/lk$1.err" && ok "$2: the real server answered $2 mid-scan" ||
		bad "$2: no $2 reply seen: $(head -c 300 "$JO_T/lk$1.err")"
}

redis_busy_loading_stall() {
	# BUSY: a script runs on the real server while the scan is slowed down
	slow_scan
	gc_redis_cli "$META" CONFIG SET busy-reply-threshold 100 >/dev/null
	( sleep 2
	  gc_redis_cli "$META" EVAL "local t = redis.call('TIME')[1]
while tonumber(redis.call('TIME')[1]) < t + 4 do end
return 1" 0 >/dev/null ) &
	disturbed_scan 2 $!
	server_reply 2 BUSY
	failed_in_scan "Redis BUSY" 2 BUSY

	# LOADING: DEBUG RELOAD of a dataset loaded slowly (1 ms per key)
	slow_scan
	gc_redis_cli "$META" CONFIG SET loading-process-events-interval-bytes 1024 >/dev/null
	( sleep 2
	  gc_redis_cli "$META" CONFIG SET key-load-delay 3000 >/dev/null
	  gc_redis_cli "$META" DEBUG RELOAD >/dev/null
	  gc_redis_cli "$META" CONFIG SET key-load-delay 0 >/dev/null ) &
	disturbed_scan 3 $!
	server_reply 3 LOADING
	failed_in_scan "Redis LOADING" 3 LOADING

	# a stall: data stops mid-scan, the proxy closes the connection after 3 s
	slow_scan
	( sleep 2; toxi_timeout redis stall 3000 ) &
	disturbed_scan 4 $!
	failed_in_scan "Redis stalled mid-scan" 4 stall
}

# proxy_reset_stall (postgres, mysql, etcd): leakcheck's reference scan,
# slowed down, its connections reset (RST) mid-scan; then stalled for good
# mid-scan: nothing comes back and the connection stays open, so only the
# driver's own timeout ($STALL_S per reply) can end the run; it must end
# within a few of those (never hang; a reply already in flight when the
# stall comes has used part of its wait), say it timed out, fail inside the
# scan and take nothing from it.
proxy_reset_stall() {
	local rc t0 t1 el lim
	slow_scan
	( sleep 2; toxi_reset_peer "$PROXY" rst 0 ) &
	disturbed_scan 5 $!
	failed_in_scan "$E connection reset mid-scan" 5 reset
	at_the_cut "reset" "$JO_T/lk5.err"

	slow_scan
	( sleep 2; toxi_timeout "$PROXY" stall 0; date +%s >"$JO_T/stall.t" ) &
	local stall=$!
	lim=$((STALL_S * 4 + 60))
	rc=0
	t0=$(date +%s)
	timeout -k 5 "$lim" "$J" leakcheck "$FMETA" --min-age 1h --json --out "$JO_T/rep6.jsonl" \
		>"$JO_T/lk6.out" 2>"$JO_T/lk6.err" || rc=$?
	t1=$(date +%s)
	wait "$stall" || true
	toxi_clear "$PROXY"
	el=$((t1 - $(cat "$JO_T/stall.t")))
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		bad "leakcheck, $E stalled: still running after $lim s (hung)"
	elif [ "$el" -ge $((STALL_S * 2 / 3)) ] && [ "$el" -le $((STALL_S * 3 + 20)) ]; then
		ok "leakcheck, $E stalled: ended $el s after the stall (driver timeout $STALL_S s)"
	else
		bad "leakcheck, $E stalled: ended $el s after the stall, want $((STALL_S * 2 / 3))..$((STALL_S * 3 + 20)) s"
	fi
	expect_incomplete "leakcheck, $E stalled mid-scan" "$rc" 5 "$JO_T/lk6.out" "$JO_T/lk6.err"
	in_scan "stall" "$JO_T/lk6.err"
	grep -Eqi 'time[d ]* ?out|within [0-9]+ s' "$JO_T/lk6.err" && ok "stall: the error says it timed out" ||
		bad "stall: the error does not say it timed out: $(grep -m1 'scan ' "$JO_T/lk6.err" | head -c 300)"
	[ ! -e "$JO_T/rep6.jsonl" ] || bad "stall: a report was left"
	echo "   ($E: the whole stalled run took $((t1 - t0)) s)"

	if [ "$E" = etcd ]; then
		# a reply cut inside its header (the first reply's is ~330 bytes):
		# libcurl alone takes that for a whole reply with no body
		toxi_limit_data "$PROXY" cut 200
		rc=0
		"$J" leakcheck "$FMETA" --min-age 1h --json --out "$JO_T/rep7.jsonl" >"$JO_T/lk7.out" 2>"$JO_T/lk7.err" || rc=$?
		toxi_clear "$PROXY"
		[ "$rc" = 5 ] && grep -q "closed inside the reply's header" "$JO_T/lk7.err" &&
			ok "etcd: a reply cut inside its header is a cut connection (exit 5)" ||
			bad "etcd: a reply cut inside its header: exit $rc: $(head -c 300 "$JO_T/lk7.err")"
		[ ! -e "$JO_T/rep7.jsonl" ] || bad "etcd header cut: a report was left"
	fi
}

# cut_at_half_scan: the cut at half the bytes of gc's plan scans alone: a
# dry --plan --count-only (a dry run also evaluates what it finds, on a
# second connection: its bytes would move the cut out of the scans).
cut_at_half_scan() {
	cut_at_half "$J" gc "$FMETA" --plan --count-only
}

gc_proxy_cuts() {
	local rc k
	# dry run (plan + evaluation on a second connection), cut mid-scan
	cut_at_half_scan
	rc=0
	"$J" gc "$FMETA" --json >"$JO_T/gc1.out" 2>"$JO_T/gc1.err" || rc=$?
	toxi_clear "$PROXY"
	expect_incomplete "gc dry run, $E cut" "$rc" 5 "$JO_T/gc1.out" "$JO_T/gc1.err"
	at_the_cut "gc dry run cut" "$JO_T/gc1.err"
	# --plan --delete: tasks only from scans read whole. Shards of 20 items:
	# the task-recording connection reads far less than the cut, the
	# scanning one is cut in the middle of its scans.
	cut_at_half_scan
	rc=0
	"$J" gc "$FMETA" --plan --delete --task-size 20 --json >"$JO_T/gc2.out" 2>"$JO_T/gc2.err" || rc=$?
	toxi_clear "$PROXY"
	expect_incomplete "gc --plan --delete, $E cut" "$rc" 5 "$JO_T/gc2.out" "$JO_T/gc2.err"
	at_the_cut "gc --plan --delete cut" "$JO_T/gc2.err"
	k=$(scan_kind "$JO_T/gc2.err")
	[ "$k" != none ] && ok "gc --plan --delete cut: inside the '$k' scan" ||
		bad "gc --plan --delete cut: not inside a scan: $(head -c 300 "$JO_T/gc2.err")"
	[ "$k" = none ] || { [ "$(task_items "$k")" = 0 ] &&
		ok "gc --plan --delete cut: no task item planned from the cut scan" ||
		bad "gc --plan --delete cut: $(task_items "$k") '$k' items planned from the cut scan"; }
	# the same plan without the fault does record items of that kind (the
	# count above can see them)
	"$J" gc "$META" --plan --delete --task-size 20 >/dev/null
	[ "$k" = none ] || { [ "$(task_items "$k")" -gt 0 ] &&
		ok "gc --plan --delete without the fault: $(task_items "$k") '$k' items recorded" ||
		bad "gc --plan --delete without the fault: no '$k' item recorded"; }
	"$J" gc "$META" --reset-tasks --delete >/dev/null
	[ "$k" = none ] || [ "$(task_items "$k")" = 0 ] || bad "gc --reset-tasks left '$k' items"
	# plan + work with --delete: the scans slowed down, every connection
	# reset (RST) 3 s in: nothing deleted
	toxi_clear "$PROXY"
	slow_scan
	( sleep 3; toxi_reset_peer "$PROXY" rst 0 ) &
	local rst=$!
	rc=0
	"$J" gc "$FMETA" --delete --task-size 20 --json >"$JO_T/gc3.out" 2>"$JO_T/gc3.err" || rc=$?
	wait "$rst" || true
	toxi_clear "$PROXY"
	expect_incomplete "gc --delete, $E connections reset" "$rc" 5 "$JO_T/gc3.out" "$JO_T/gc3.err"
	at_the_cut "gc --delete reset" "$JO_T/gc3.err"
	"$J" gc "$META" --reset-tasks --delete >/dev/null
	expect_unchanged "gc with $E faults" start
}

gc_sqlite_lock() {
	local rc
	# a dry run stopped halfway through its reads while it evaluates the
	# removed files; the lock is taken there and held for 7 s
	run_midway gc1 7 "$J" gc "$FMETA" --json --batch 1 --task-size 100000
	rc=$(cat "$JO_T/gc1.rc")
	case $rc in
	5) expect_incomplete "gc dry run, SQLite locked" "$rc" 5 "$JO_T/gc1.out" "$JO_T/gc1.err" ;;
	4) [ "$(summary_field "$JO_T/gc1.out" errors)" -gt 0 ] 2>/dev/null &&
		ok "gc dry run, SQLite locked: exit 4, the items it could not read counted as errors" ||
		bad "gc dry run, SQLite locked: exit 4 without errors" ;;
	*) bad "gc dry run, SQLite locked: exit $rc, want 5 (or 4 with errors)"; tail -5 "$JO_T/gc1.err" ;;
	esac
	grep -q "locked" "$JO_T/gc1.err" && ok "gc dry run, SQLite locked: the error says locked" ||
		bad "gc dry run, SQLite locked: $(head -c 300 "$JO_T/gc1.err")"
	expect_unchanged "gc with SQLite locked" start
}

# ---- the engines

need_toxiproxy() {
	[ -n "${JO_TOXI_API:-}" ] || start_toxiproxy $((JO_PORT_BASE + 1))
}

# proxied ENGINE PROXY N PORTVAR: ENGINE started with a database for this
# script (META), and the toxiproxy PROXY on port base+N (lp, engine_up's)
# in front of the port ENGINE listens on (the variable named PORTVAR).
proxied() {
	engine_start "$1"
	engine_meta "$1" "$NAME"
	META=$JO_META
	need_toxiproxy
	PROXY=$2
	lp=$((JO_PORT_BASE + $3))
	toxi_proxy "$PROXY" "$lp" "${!4}"
}

# engine_up E: E's server started, an empty volume database on it and a
# proxy in front of it. Sets META (direct: juicefs and the test's readers),
# FMETA (what jfsops is given: through the proxy), PROXY (the proxy's name)
# and STALL_S (the driver's wait for one reply, for the stall case).
engine_up() {
	local E=$1 lp
	case $E in
	redis)
		start_redis "$JO_PORT_BASE" --enable-debug-command local
		need_toxiproxy
		PROXY=redis
		toxi_redis "$PROXY" $((JO_PORT_BASE + 2))
		META=redis://127.0.0.1:$JO_REDIS_PORT/1
		FMETA=redis://127.0.0.1:$((JO_PORT_BASE + 2))/1
		;;
	sqlite)
		META=sqlite3://$JO_T/$E.db
		FMETA=$META
		PROXY=
		;;
	postgres)
		proxied postgres pg 3 JO_PG_PORT
		FMETA=${META/@127.0.0.1:$JO_PG_PORT\//@127.0.0.1:$lp/}
		STALL_S=60 # libpq reply wait (common/meta/sql/drv_pg.c)
		;;
	mysql)
		proxied mysql my 4 JO_MY_PORT
		# go-sql-driver's readTimeout: 5 s per read instead of 30 s
		FMETA="${META/(127.0.0.1:$JO_MY_PORT)/(127.0.0.1:$lp)}?readTimeout=5s"
		STALL_S=5
		;;
	etcd)
		proxied etcd etcd 5 JO_ETCD_ENGINE_PORT
		FMETA=${META/127.0.0.1:$JO_ETCD_ENGINE_PORT\//127.0.0.1:$lp/}
		STALL_S=60 # the request timeout (common/meta/tkv/etcd.c)
		;;
	esac
	[ -z "$PROXY" ] || [ "$FMETA" != "$META" ] || jo_die "$E: cannot point $META at the proxy"
}

for E in $ENGINES; do
	case $E in
	redis | sqlite | postgres | mysql | etcd) ;;
	*) jo_die "unknown engine '$E' (redis, sqlite, postgres, mysql, etcd)" ;;
	esac
done
for E in $ENGINES; do
	run_engine "$E"
done

if [ "$FAILS" -gt 0 ]; then
	echo "$FAILS check(s) failed"
	exit 1
fi
echo "fault_meta_scan: all checks passed"
