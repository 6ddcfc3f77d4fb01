#!/usr/bin/env bash
# The JSON contract (docs/json): every command run with --json ends in one
# summary record of the shared envelope (type, command, version, volume or
# src/dst/job, complete, exit, elapsed_s, started, finished) and its
# counters, valid against docs/json/summary.schema.json; leakcheck's report
# lines are valid against leakcheck-candidate.schema.json; the summary's
# "exit" is the process's exit code and "version" is `jfsops --version`'s.
# gc (dry, dry --plan, --delete), compact (report, --apply), the status
# record of gc and compact --status, leakcheck
# (check with a planted leak, --delete-from --dry-run, --delete-from, a
# restore of its quarantine), sync, lance,
# warmup (--dry-run), doctor, usage, export, trash ls. A SQLite +
# file-storage volume, one mount.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup
B=$JO_BIN
PY=$JO_VENV/bin/python
CHECK="$PY $JO_REPO/tests/tools/jsoncheck.py"
META="sqlite3://$JO_T/meta.db"
fails=0
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

jfs_format "$META" "$JO_T/bucket" jcvol --trash-days 0
MP=$JO_T/mnt
jfs_mount "$META" "$MP" --no-bgjob --max-deletes 0
mkdir -p "$MP/d"
for i in 1 2 3 4; do head -c $((i * 300000)) /dev/urandom >"$MP/d/f$i"; done
python3 "$JO_REPO/tests/tools/fragment.py" "$MP/frag" "$JO_T/frag.mirror" 1 12 $((1 << 20)) >/dev/null
rm -f "$MP/d/f1" "$MP/d/f2"  # pending deletions for gc
"$PY" - "$MP/ds" <<'PYEOF'
import sys, lance, pyarrow as pa
lance.write_dataset(pa.table({"id": pa.array(range(2000), pa.int64()),
                              "v": pa.array([float(i) for i in range(2000)], pa.float64())}), sys.argv[1])
PYEOF
jfs_umount "$MP"
# a planted leak: a block key of a slice id below the counter nothing
# references, old
leak=$JO_T/bucket/jcvol/chunks/0/3/3000_0_4096
mkdir -p "$(dirname "$leak")"
head -c 4096 /dev/urandom >"$leak"
touch -d '3 days ago' "$leak"

version=$("$B" --version | awk '{print $2}')
# run NAME WANT_EXIT CMD... : stdout to NAME.json; the exit and the records checked
run() {
	local name=$1 want=$2 rc=0
	shift 2
	"$@" >"$JO_T/$name.json" 2>"$JO_T/$name.err" || rc=$?
	if [ "$rc" != "$want" ]; then
		bad "$name: exit $rc, want $want: $(tail -n 2 "$JO_T/$name.err" | tr '\n' ' ')"
		return
	fi
	if ! $CHECK --exit "$rc" --command "$2" "$JO_T/$name.json"; then
		bad "$name: records not valid"
		return
	fi
	tail -n 1 "$JO_T/$name.json" | "$PY" -c 'import json,sys; s=json.load(sys.stdin); sys.exit(s["version"] != sys.argv[1])' "$version" ||
		bad "$name: the summary's version is not jfsops's ($version)"
}

run gc-dry 0 "$B" gc "$META" --json
run gc-dry-plan 0 "$B" gc "$META" --plan --json
run gc-delete 0 "$B" gc "$META" --delete --json
run compact-report 0 "$B" compact "$META" --json
run compact-apply 0 "$B" compact "$META" --apply --json
# --status is a query, not a run: one "status" record (docs/json/README.md)
for c in gc compact; do
	"$B" $c "$META" --status --json >"$JO_T/status-$c.json" 2>"$JO_T/status-$c.err" ||
		bad "$c --status --json: exit $?"
	"$PY" - "$c" "$JO_T/status-$c.json" <<'PYEOF' || bad "$c --status --json: not one status record"
import json, sys
lines = open(sys.argv[2]).read().splitlines()
assert len(lines) == 1, lines
s = json.loads(lines[0])
assert s == {"type": "status", "command": sys.argv[1], "tasks": s["tasks"], "leased": s["leased"]}, s
assert all(type(s[k]) is int and s[k] >= 0 for k in ("tasks", "leased")), s
PYEOF
done
run leakcheck 1 "$B" leakcheck "$META" --out "$JO_T/leaks.jsonl" --json
$CHECK "$JO_T/leaks.jsonl" >/dev/null 2>&1 && bad "leaks.jsonl: a report has no summary line, so the check must say so"
"$PY" - "$JO_T/leaks.jsonl" "$JO_REPO/docs/json/leakcheck-candidate.schema.json" <<'PYEOF' || bad "the report's candidate lines are not valid"
import json, sys, jsonschema
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[2])))
lines = [json.loads(l) for l in open(sys.argv[1])]
assert any(l["type"] == "leaked" and l["key"].endswith("/3000_0_4096") for l in lines), lines
for l in lines:
    v.validate(l)
PYEOF
run leakcheck-delete-dry 0 "$B" leakcheck "$META" --delete-from "$JO_T/leaks.jsonl" --dry-run --json
run leakcheck-delete 0 "$B" leakcheck "$META" --delete-from "$JO_T/leaks.jsonl" --quarantine "$JO_T/q.tar.zst" --json
run leakcheck-restore 0 "$B" leakcheck "$META" --restore "$JO_T/q.tar.zst" --json
mkdir -p "$JO_T/src/a"
for i in 1 2; do head -c 1000 /dev/urandom >"$JO_T/src/a/f$i"; done
run sync 0 "$B" sync "$JO_T/src" "$JO_T/dst" --no-state --json
run lance 0 "$B" lance "$META:/ds" --columns id --json
grep '"type":"range"' "$JO_T/lance.json" >"$JO_T/ranges.jsonl"
run warmup-list 0 "$B" warmup "$META" --prefix /ds --ranges "$JO_T/ranges.jsonl" --dry-run --json
run doctor 0 "$B" doctor "$META" --json
run usage 0 "$B" usage "$META" --json
run export 0 "$B" export "$META" --out "$JO_T/export" --json
run trash-ls 0 "$B" trash ls "$META" --json

if [ $fails -gt 0 ]; then
	echo "json_contract: $fails failure(s)"
	exit 1
fi
echo "json_contract: ok"
