#!/usr/bin/env bash
# jfsops export and usage --html stopped by SIGINT and SIGTERM mid-walk (a
# Redis volume of 30,000 files read through a Toxiproxy proxy that adds
# a bandwidth limit, so the walk takes seconds): exit 130 / 143, no _SUCCESS, no
# table and no temporary file left in the export directory, no sort spill
# left in --tmp-dir, no HTML page and no temporary file beside it. Then the
# same export runs to the end into the same directory (an interrupted export
# leaves it reusable).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup
start_redis $((JO_PORT_BASE + 0))
start_toxiproxy $((JO_PORT_BASE + 20))
toxi_redis slow $((JO_PORT_BASE + 21))
META="redis://127.0.0.1:$JO_REDIS_PORT/1"
SLOW="redis://127.0.0.1:$((JO_PORT_BASE + 21))/1"
"$JUICEFS" format --no-agent sqlite3://"$JO_T/tpl.db" tpl --storage file --bucket "$JO_T/tpl" \
	>"$JO_T/tpl.log" 2>&1 || jo_die "format of the template failed"
"$JUICEFS" dump --no-agent sqlite3://"$JO_T/tpl.db" "$JO_T/tpl.json" >>"$JO_T/tpl.log" 2>&1 ||
	jo_die "dump of the template failed"
python3 "$JO_REPO/bench/usage_gen.py" "$JO_T/tpl.json" 30000 "$JO_T/gen.json" >/dev/null
"$JUICEFS" load --no-agent "$META" "$JO_T/gen.json" >"$JO_T/load.log" 2>&1 ||
	{ jo_tail "$JO_T/load.log"; jo_die "juicefs load failed"; }
toxi_bandwidth slow bw 300

mkdir -p "$JO_T/tmp"
# signal_running PID SIG WHAT: PID (WHAT) must still be running 1.5 s after
# it started; send it SIG and wait for it: its exit code in rc.
signal_running() {
	sleep 1.5
	kill -0 "$1" 2>/dev/null || jo_die "$3 finished before the signal: make the volume bigger"
	kill -"$2" "$1"
	rc=0
	wait "$1" || rc=$?
}

for sig in INT TERM; do
	out=$JO_T/out-$sig
	"$JO_BIN" export "$SLOW" --out "$out" --tables files,slices --tmp-dir "$JO_T/tmp" \
		>"$JO_T/$sig.out" 2>"$JO_T/$sig.err" &
	signal_running $! $sig export
	want=$([ $sig = INT ] && echo 130 || echo 143)
	[ $rc = "$want" ] || { cat "$JO_T/$sig.err" >&2; jo_die "export after SIG$sig exited $rc, want $want"; }
	[ -z "$(ls -A "$out")" ] || jo_die "SIG$sig left in the export directory: $(ls -A "$out")"
	[ -z "$(ls -A "$JO_T/tmp")" ] || jo_die "SIG$sig left sort spills: $(ls -A "$JO_T/tmp")"

	page=$JO_T/page-$sig/u.html
	mkdir -p "$(dirname "$page")"
	"$JO_BIN" usage "$SLOW" --html "$page" --tmp-dir "$JO_T/tmp" >/dev/null 2>"$JO_T/u$sig.err" &
	signal_running $! $sig usage
	[ $rc = "$want" ] || { cat "$JO_T/u$sig.err" >&2; jo_die "usage after SIG$sig exited $rc, want $want"; }
	[ -z "$(ls -A "$(dirname "$page")")" ] || jo_die "usage SIG$sig left: $(ls -A "$(dirname "$page")")"
	[ -z "$(ls -A "$JO_T/tmp")" ] || jo_die "usage SIG$sig left sort spills: $(ls -A "$JO_T/tmp")"
done
toxi_remove slow bw
"$JO_BIN" export "$META" --out "$JO_T/out-INT" --tmp-dir "$JO_T/tmp" >/dev/null ||
	jo_die "export into the interrupted run's directory failed"
[ -f "$JO_T/out-INT/_SUCCESS" ] || jo_die "no _SUCCESS after the full run"
echo "export_interrupt: ok"
