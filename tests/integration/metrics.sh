#!/usr/bin/env bash
# --metrics-file: every long-running command (gc, leakcheck, sync, compact,
# warmup) must take it, and every command that takes it writes a file that
# prometheus_client's text parser accepts, with HELP/TYPE for each family,
# names jfsops_<command>_..., gauges only (per-run values _last_run_<thing>),
# _last_run_exit_code/_success/_duration_seconds/_timestamp_seconds and
# labels volume= (sync: job=) on every sample (tests/tools/promcheck.py).
# Then the alert's view: a failure before the start (no such database), a
# failure midway (the bucket gone) and a usage error keep the last success
# (to the digit) and the labels; a second volume and a second sync job write
# series of their own. Then the Grafana dashboard (docs/grafana/jfsops.json):
# every metric and label it queries is one these runs wrote
# (tests/tools/dashcheck.py). A SQLite + file-storage volume, no servers.
JO_PORT_BASE=${JO_PORT_BASE:-9660}
. "$(dirname "$0")/lib/init.sh"
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
	opts=$("$B" help --options-json "$c" 2>/dev/null | python3 -c 'import json, sys
print("\n".join("--" + o["long"] for o in json.load(sys.stdin)["options"] if not o["hidden"]))') || opts=
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
	sync) "$B" sync "$JO_T/src" "$JO_T/dst" --job nightly --metrics-file "$f" >"$JO_T/$c.out" 2>&1 || rc=$? ;;
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
	case $c in
	sync) lab=(job=nightly) ;;
	*) lab=(volume=mxvol) ;;
	esac
	"$PY" "$JO_REPO/tests/tools/promcheck.py" "$c" "$f" exit=0 success=1 last_success=present "${lab[@]}" ||
		bad "$c: invalid metrics file"
	# atomic: no temp file left next to it
	ls "$JO_T" | grep -E "^$c\.prom.+" && bad "$c: a temporary metrics file was left behind"
done

# the files of these successful runs, for the dashboard check at the end
mkdir -p "$JO_T/ok"
cp "$JO_T"/*.prom "$JO_T/ok/"

# the last success survives failed runs, at full precision, with its labels
pc() { "$PY" "$JO_REPO/tests/tools/promcheck.py" "$@"; }
last_ok() { "$PY" "$JO_REPO/tests/tools/promcheck.py" -v "$1" "$2" |
	"$PY" -c 'import json,sys; print(repr(json.load(sys.stdin)["jfsops_'"$1"'_last_success_timestamp_seconds"][0][1]))'; }
G=$JO_T/gc.prom
t=$(last_ok gc "$G")
case $t in *.*) ;; *) bad "gc: last success $t has no sub-second part (full precision)" ;; esac
rc=0
"$B" gc "sqlite3://$JO_T/no-such.db" --metrics-file "$G" >"$JO_T/gcfail.out" 2>&1 || rc=$?
[ "$rc" != 0 ] || bad "gc on a missing database: exit 0"
pc gc "$G" exit="$rc" success=0 last_success="$t" volume=mxvol ||
	bad "gc: a run that failed before it started (exit $rc) lost the last success or the volume label"
mv "$JO_T/bucket" "$JO_T/bucket.away"
rc=0
"$B" leakcheck "$META" --metrics-file "$JO_T/leakcheck.prom" >"$JO_T/lcfail.out" 2>&1 || rc=$?
mv "$JO_T/bucket.away" "$JO_T/bucket"
[ "$rc" = 8 ] || bad "leakcheck without its bucket: exit $rc, want 8"
pc leakcheck "$JO_T/leakcheck.prom" exit=8 success=0 last_success=present volume=mxvol ||
	bad "leakcheck: a run that failed midway lost the last success"
t=$(last_ok sync "$JO_T/sync.prom")
rc=0
"$B" sync "$JO_T/no-such-src" "$JO_T/dst" --job nightly --metrics-file "$JO_T/sync.prom" >"$JO_T/syncfail.out" 2>&1 || rc=$?
pc sync "$JO_T/sync.prom" exit=8 success=0 last_success="$t" job=nightly ||
	bad "sync: a run without its SRC (exit $rc) lost the last success"
cp "$G" "$JO_T/gc.before"
"$B" gc "$META" --metrics-file "$G" --no-such-flag >/dev/null 2>&1 && bad "gc accepted --no-such-flag"
cmp -s "$G" "$JO_T/gc.before" || bad "gc: a usage error rewrote the metrics file"
# a second volume and a second sync job on the same host: series of their own
META2="sqlite3://$JO_T/meta2.db"
jfs_format "$META2" "$JO_T/bucket2" mxvol2 --trash-days 0
"$B" gc "$META2" --metrics-file "$JO_T/gc2.prom" >/dev/null 2>&1 || bad "gc on the second volume failed"
pc gc "$JO_T/gc2.prom" exit=0 volume=mxvol2 || bad "gc: the second volume's series are not its own"
"$B" sync "$JO_T/src" "$JO_T/dst2" --metrics-file "$JO_T/sync2.prom" >/dev/null 2>&1 || bad "a second sync failed"
j2=$("$PY" "$JO_REPO/tests/tools/promcheck.py" -v sync "$JO_T/sync2.prom" |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin)["jfsops_sync_last_run_exit_code"][0][0]["job"])')
case $j2 in sync-????????????????) ;; *) bad "sync without --job: job label '$j2', want sync-HASH" ;; esac
pc sync "$JO_T/sync2.prom" exit=0 job="$j2" || bad "sync: the default job label is not on every sample"
[ "$(cat "$JO_T"/*.prom | grep -c '_total')" = 0 ] || bad "a per-run value is still a counter (_total)"
# the Grafana dashboard of docs/ queries only metrics and labels these runs wrote
"$PY" "$JO_REPO/tests/tools/dashcheck.py" "$JO_REPO/docs/grafana/jfsops.json" \
	"$JO_T"/ok/*.prom "$JO_T/gc2.prom" "$JO_T/sync2.prom" ||
	bad "docs/grafana/jfsops.json queries what jfsops does not write"

if [ "$fails" -gt 0 ]; then
	echo "metrics: $fails failure(s)"
	exit 1
fi
echo "metrics: ok"
