#!/usr/bin/env bash
# sync --resume never trusts a listing position saved by an older run.
# Found by the crash campaign (tests/chaos): a full run with --delete-dst
# saves no position and left the one of an earlier killed run in the state
# file; after a later run was killed, --resume listed only after that stale
# position and skipped the objects changed before it (exit 0, DST != SRC).
# Local directories only, no services.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup
S=$JO_T/src D=$JO_T/dst ST=$JO_T/state.db
mkdir -p "$S"
for i in $(seq -w 1 300); do head -c 20000 /dev/urandom >"$S/f$i"; done

listpos() { sqlite3 "$ST" "SELECT v FROM kv WHERE k='listpos'" 2>/dev/null || true; }

# kill_when_saved: a slow run, SIGKILLed once it has saved a position
kill_when_saved() {
	"$JO_BIN" sync -q --state "$ST" --bwlimit 1M --transfers 2 "$@" "$S" "$D" 2>/dev/null &
	local pid=$! i
	for i in $(seq 1 200); do
		[ -n "$(listpos)" ] && break
		kill -0 $pid 2>/dev/null || jo_die "the slow run ended before saving a position"
		sleep 0.05
	done
	kill -KILL $pid
	wait $pid 2>/dev/null || true
	[ -n "$(listpos)" ] || jo_die "no position was saved within 10 s"
}

# same: DST holds SRC's objects. A SIGKILLed copy can leave the directory
# store's own temp file (".jfs.KEY.tmp.N", created, written, then renamed
# into place; juicefs's file store names them so too): no object, never
# listed or copied, so not compared; whatever else differs fails.
same() { diff -r -x '.jfs.*.tmp.*' "$S" "$D" >/dev/null; }

# 1. a run killed mid-way saves its position P
kill_when_saved
pos=$(listpos)
echo "killed run saved position $pos" >&2
# 2. a complete run with --delete-dst (it saves no position of its own)
"$JO_BIN" sync -q --state "$ST" --delete-dst "$S" "$D" || jo_die "full run failed"
same || jo_die "the full run left DST != SRC"
[ -z "$(listpos)" ] || jo_die "a complete full run left the position '$(listpos)' of an older run"
# 3. objects before P change; a run with --delete-dst is killed at once
for f in f001 f002 f003; do head -c 1000 /dev/urandom >"$S/$f"; done
"$JO_BIN" sync -q --state "$ST" --delete-dst --bwlimit 1K "$S" "$D" 2>/dev/null &
pid=$!
sleep 0.3
kill -KILL $pid
wait $pid 2>/dev/null || true
# 4. --resume must not skip them
"$JO_BIN" sync -q --state "$ST" --resume "$S" "$D" || jo_die "--resume failed"
same || { diff -rq -x '.jfs.*.tmp.*' "$S" "$D" | head -n 5 >&2; jo_die "after --resume DST != SRC: a stale position was used"; }

# a genuine resume still lists after the position of the run it continues
rm -rf "$D"
kill_when_saved
pos=$(listpos)
"$JO_BIN" sync -q --json --state "$ST" --resume "$S" "$D" >"$JO_T/resume.json" || jo_die "--resume failed"
grep -q '"resumed_listing":true' "$JO_T/resume.json" || jo_die "--resume did not use the position $pos"
same || { diff -rq -x '.jfs.*.tmp.*' "$S" "$D" | head -n 10 >&2; jo_die "after a genuine --resume DST != SRC (the killed run saved $pos)"; }
[ -z "$(listpos)" ] || jo_die "a completed --resume left a position"
echo "sync_resume: ok"
