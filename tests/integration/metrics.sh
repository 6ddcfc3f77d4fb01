#!/usr/bin/env bash
# --metrics-file: every long-running command (gc, leakcheck, sync, compact,
# warmup) must take it, and every command that takes it writes a file that
# prometheus_client's text parser accepts, with HELP/TYPE for each family,
# names jfsops_<command>_..., counters ending in _total, and
# jfsops_<command>_duration_seconds / _last_success_timestamp_seconds
# (tests/tools/promcheck.py). A SQLite + file-storage volume, no servers
# (juicefs sync uses metrics ports from 9690).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
JO_PORT_BASE=${JO_PORT_BASE:-9660}
. "$here/../lib/services.sh"
jo_setup
B=$JO_BIN
PY=$JO_VENV/bin/python
META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_T/bucket" mxvol --trash-days 0
mkdir -p "$JO_T/src/a" "$JO_T/dst"
for i in 1 2 3; do head -c $((i * 50000)) /dev/urandom >"$JO_T/src/a/f$i"; done
jfs_sync_in "$JO_T/src" "$META"

fails=0
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
has_metrics=()
for c in $("$B" --list-commands); do
	# no "| grep -q" here: with pipefail, grep quitting early can fail the writer (SIGPIPE)
	opts=$(python3 "$JO_REPO/tests/tools/optables.py" "$JO_REPO" "$c" 2>/dev/null) || opts=
	grep -qx -- --metrics-file <<<"$opts" && has_metrics+=("$c")
done
echo "commands with --metrics-file: ${has_metrics[*]:-(none)}"
for c in gc leakcheck sync compact warmup; do
	case " ${has_metrics[*]:-} " in
	*" $c "*) ;;
	*) bad "$c: long-running, but has no --metrics-file" ;;
	esac
done

for c in "${has_metrics[@]}"; do
	f=$JO_T/$c.prom
	rc=0
	case $c in
	gc) "$B" gc "$META" --metrics-file "$f" >"$JO_T/$c.out" 2>&1 || rc=$? ;;
	leakcheck) "$B" leakcheck "$META" --out "$JO_T/leaks.jsonl" --metrics-file "$f" >"$JO_T/$c.out" 2>&1 || rc=$?
		[ "$rc" = 1 ] && rc=0 ;;
	compact) "$B" compact "$META" --metrics-file "$f" >"$JO_T/$c.out" 2>&1 || rc=$? ;;
	warmup) echo a/f1 | "$B" warmup "$META" --dry-run --metrics-file "$f" >"$JO_T/$c.out" 2>&1 || rc=$? ;;
	sync) "$B" sync "$JO_T/src" "$JO_T/dst" --metrics-file "$f" >"$JO_T/$c.out" 2>&1 || rc=$? ;;
	*) bad "$c: takes --metrics-file but this test has no invocation for it (add one)"; continue ;;
	esac
	if [ "$rc" != 0 ]; then
		bad "$c: exit $rc: $(tail -n 3 "$JO_T/$c.out" | tr '\n' ' ')"
		continue
	fi
	if [ ! -s "$f" ]; then
		bad "$c: wrote no metrics file"
		continue
	fi
	"$PY" "$JO_REPO/tests/tools/promcheck.py" "$c" "$f" || bad "$c: invalid metrics file"
	# atomic: no temp file left next to it
	ls "$JO_T" | grep -E "^$c\.prom.+" && bad "$c: a temporary metrics file was left behind"
done
if [ "$fails" -gt 0 ]; then
	echo "metrics: $fails failure(s)"
	exit 1
fi
echo "metrics: ok"
