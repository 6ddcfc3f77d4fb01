#!/bin/bash
# warmup_signals.sh: `jfsops warmup` interrupted while it waits for its range
# list exits 143 (SIGTERM) / 130 (SIGINT), as docs/exit-codes.md says,
# and says it was interrupted (not "cannot read ...: Interrupted system
# call", exit 3). The waits: opening a FIFO nobody writes yet, reading a FIFO
# whose writer is idle, reading an idle stdin pipe; and --dry-run still
# works when the lines do come. A SQLite volume on file storage, no servers.
# run_all: asan
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/services.sh
. "$HERE/../lib/services.sh"
jo_setup

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

META=sqlite3://$JO_T/meta.db
jfs_format "$META" "$JO_T/objs" sigvol --trash-days 0
mkdir -p "$JO_T/src"
head -c 300000 /dev/urandom >"$JO_T/src/f.bin"
jfs_sync_in "$JO_T/src" "$META"

# wait_blocked PID: wait until PID sleeps in the kernel (it waits for input)
wait_blocked() {
	local i st
	for i in $(seq 1 100); do
		st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || fail "pid $1 is gone"
		[ "$st" = S ] && return 0
		sleep 0.05
	done
	fail "pid $1 never waited (state $st)"
}

# expect_exit PID CODE WHAT: wait for PID, check its exit code and stderr
expect_exit() {
	local pid=$1 want=$2 what=$3 rc=0
	wait "$pid" || rc=$?
	[ "$rc" = "$want" ] || fail "$what: exit $rc, want $want; stderr: $(cat "$JO_T/err")"
	if grep -q "Interrupted system call" "$JO_T/err"; then
		fail "$what: reported as an I/O error: $(cat "$JO_T/err")"
	fi
	grep -q "interrupted" "$JO_T/err" || fail "$what: no 'interrupted' message: $(cat "$JO_T/err")"
	jo_log "$what: exit $rc"
}

# 1. a FIFO nobody has opened for writing yet: blocked in open()
mkfifo "$JO_T/fifo1"
"$JO_BIN" warmup "$META" --dry-run --ranges "$JO_T/fifo1" >/dev/null 2>"$JO_T/err" &
pid=$!
wait_blocked $pid
sleep 0.2
kill -TERM $pid
expect_exit $pid 143 "SIGTERM while opening a FIFO"

# 2. a FIFO whose writer is idle: blocked in read()
mkfifo "$JO_T/fifo2"
"$JO_BIN" warmup "$META" --dry-run --ranges "$JO_T/fifo2" >/dev/null 2>"$JO_T/err" &
pid=$!
exec 7>"$JO_T/fifo2"
echo "f.bin 0 10" >&7
wait_blocked $pid
sleep 0.2
kill -INT $pid
expect_exit $pid 130 "SIGINT while reading a FIFO"
exec 7>&-

# 3. stdin, an idle pipe
{
	sleep 60 &
	echo $! >"$JO_T/sleep.pid"
	wait
} | "$JO_BIN" warmup "$META" --dry-run >/dev/null 2>"$JO_T/err" &
pid=$!
wait_blocked $pid
sleep 0.2
kill -TERM $pid
sleep 0.5
kill "$(cat "$JO_T/sleep.pid")" 2>/dev/null || true # ends the pipe's writer too
expect_exit $pid 143 "SIGTERM while reading stdin"

# 4. and the same FIFO list read to its end lists the blocks
mkfifo "$JO_T/fifo3"
"$JO_BIN" warmup "$META" --dry-run --ranges "$JO_T/fifo3" >"$JO_T/out" 2>"$JO_T/err" &
pid=$!
printf 'f.bin 0 10\nf.bin 290000 10\n' >"$JO_T/fifo3"
rc=0
wait $pid || rc=$?
[ $rc = 0 ] || fail "FIFO read to its end: exit $rc: $(cat "$JO_T/err")"
grep -q "^total: files 1, ranges 2 " "$JO_T/out" || fail "FIFO list: $(cat "$JO_T/out")"
echo "PASS warmup_signals"
