#!/usr/bin/env bash
# jfsops leakcheck interrupted (SIGINT, SIGTERM) while its external sort has
# runs on disk: it stops with 130/143, says so, and leaves no temp files.
# Uses the hidden synthetic mode (no services needed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BIN=${JFSOPS_BIN:-$repo/build/jfsops}
T=$(mktemp -d "${TMPDIR:-/tmp}/lkcancel.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
for sig in INT TERM; do
	mkdir -p "$T/tmp"
	"$BIN" leakcheck --synthetic 20000000 --mem-limit 16M --tmp-dir "$T/tmp" 2>"$T/err" >"$T/out" &
	pid=$!
	for i in $(seq 1 200); do   # until a run file exists (20 s at most)
		compgen -G "$T/tmp/jo-xsort-*/run-*.zst" >/dev/null && break
		sleep 0.1
	done
	compgen -G "$T/tmp/jo-xsort-*/run-*.zst" >/dev/null || { echo "FAIL: no run file appeared" >&2; fail=1; }
	kill -"$sig" "$pid"
	rc=0
	wait "$pid" || rc=$?
	want=130; [ $sig = TERM ] && want=143
	[ $rc = $want ] || { echo "FAIL: SIG$sig: exit $rc, expected $want" >&2; fail=1; }
	grep -q canceled "$T/err" || { echo "FAIL: SIG$sig: no 'canceled' message" >&2; cat "$T/err" >&2; fail=1; }
	[ -z "$(ls -A "$T/tmp")" ] || { echo "FAIL: SIG$sig: temp files left:" >&2; ls -R "$T/tmp" >&2; fail=1; }
	[ ! -s "$T/out" ] || { echo "FAIL: SIG$sig: a result was printed" >&2; fail=1; }
	rm -rf "$T/tmp"
done
[ $fail = 0 ] && echo "leakcheck cancel: ok" >&2
exit $fail
