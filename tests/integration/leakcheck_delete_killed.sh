#!/usr/bin/env bash
# jfsops leakcheck --delete-from writes its audit as it works (SQLite + file):
# 400 planted leaks (and a line for a live block, kept as referenced);
#   - --dry-run deletes nothing and says "would delete 400" (would_delete in
#     --json, a "would delete" audit line each);
#   - a run in batches of 100 (--delete-rate 100) is killed with SIGKILL
#     mid-run: every object gone from the bucket has an audit line, and no
#     line says "deleted" for an object still there;
#   - a rerun finishes: every leak gone, each with a final audit line, the
#     live block still there and `jfsops cat` still reads its file.
# Ports: juicefs metrics from JO_PORT_BASE+30.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export JO_PORT_BASE=${JO_PORT_BASE:-9490}
. "$here/../lib/services.sh"
jo_setup

N=400
NAME=lkkill
OBJS=$JO_T/objs
DB=$JO_T/meta.db
META="sqlite3://$DB"
jfs_format "$META" "$OBJS" "$NAME" --block-size 1M --trash-days 0
mkdir -p "$JO_T/src"
head -c 5000 /dev/urandom >"$JO_T/src/f1"
jfs_sync_in "$JO_T/src" "$META"
live=$(cd "$OBJS" && find "$NAME/chunks" -type f -name '*_0_5000' | head -1)
[ -n "$live" ] || jo_die "no block of f1 in the bucket"

# N leaks: valid block keys of unreferenced slice ids below the counter, old
base=$(sqlite3 "$DB" "SELECT value FROM jfs_counter WHERE name = 'nextChunk'")
[ -n "$base" ] || jo_die "no nextChunk counter in $DB"
sqlite3 "$DB" "UPDATE jfs_counter SET value = value + 100000 WHERE name = 'nextChunk'"
"$JO_VENV/bin/python" - "$OBJS" "$NAME" "$base" "$N" "$live" >"$JO_T/cands.jsonl" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["JO_REPO"], "tests/integration/lib"))
from leakcheck_tool import block_key
objs, name, base, n, live = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
for i in range(n):
    sid = base + 1000 + i
    key = block_key(name, False, sid, 0, 100)
    os.makedirs(os.path.dirname(os.path.join(objs, key)), exist_ok=True)
    with open(os.path.join(objs, key), "wb") as f:
        f.write(os.urandom(100))
    print(json.dumps({"type": "leaked", "key": key, "slice": sid, "size": 100,
                      "reason": "unreferenced"}))
print(json.dumps({"type": "leaked", "key": live, "slice": 0, "size": 5000,
                  "reason": "unreferenced"}))
PY
find "$OBJS/$NAME/chunks" -type f -exec touch -d '3 hours ago' {} +
planted() { (cd "$OBJS" && find "$NAME/chunks" -type f -name '*_0_100' | sort); }
planted >"$JO_T/all.txt"
[ "$(wc -l <"$JO_T/all.txt")" = $N ] || jo_die "planted $(wc -l <"$JO_T/all.txt") objects, not $N"

# 1. dry run: nothing deleted, "would delete N"
rc=0
"$JO_BIN" leakcheck "$META" --delete-from "$JO_T/cands.jsonl" --dry-run --json \
	--audit "$JO_T/dry-audit.jsonl" >"$JO_T/dry.json" 2>"$JO_T/dry.err" || rc=$?
cat "$JO_T/dry.err" >&2
[ $rc = 0 ] || jo_die "dry run: exit $rc"
grep -q "would delete $N " "$JO_T/dry.err" || jo_die "dry run: stderr does not say 'would delete $N'"
[ "$(jq -r 'select(.type == "summary") | .would_delete' "$JO_T/dry.json")" = $N ] ||
	jo_die "dry run: summary $(cat "$JO_T/dry.json")"
[ "$(jq -r 'select(.type == "summary") | .deleted' "$JO_T/dry.json")" = 0 ] || jo_die "dry run: deleted is not 0"
[ "$(grep -c '"result":"would delete"' "$JO_T/dry-audit.jsonl")" = $N ] || jo_die "dry run: not $N 'would delete' audit lines"
grep -q "\"key\":\"$live\".*\"result\":\"kept: referenced\"" "$JO_T/dry-audit.jsonl" ||
	jo_die "dry run: the live block is not audited as kept: referenced"
cmp -s <(planted) "$JO_T/all.txt" || jo_die "dry run: objects were deleted"

# 2. batches of 100, SIGKILL once at least one batch is gone and the run is not done
"$JO_BIN" leakcheck "$META" --delete-from "$JO_T/cands.jsonl" --delete-rate 100 \
	--audit "$JO_T/audit.jsonl" >"$JO_T/kill.out" 2>"$JO_T/kill.err" &
pid=$!
killed=0
for i in $(seq 1 600); do
	left=$(planted | wc -l)
	if [ "$left" -le $((N - 100)) ] && [ "$left" -gt 0 ]; then
		kill -KILL "$pid"
		killed=1
		break
	fi
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
rc=0
wait "$pid" || rc=$?
[ $killed = 1 ] || { cat "$JO_T/kill.err" >&2; jo_die "the run ended (exit $rc, $left left) before it could be killed mid-run"; }
[ $rc = 137 ] || jo_die "killed run: exit $rc, expected 137"
planted >"$JO_T/left.txt"
comm -23 "$JO_T/all.txt" "$JO_T/left.txt" >"$JO_T/gone.txt"
echo "killed with $(wc -l <"$JO_T/left.txt") of $N left, $(wc -l <"$JO_T/gone.txt") gone, $(wc -l <"$JO_T/audit.jsonl") audit lines" >&2
[ -s "$JO_T/gone.txt" ] || jo_die "nothing was deleted before the kill"
"$JO_VENV/bin/python" - "$JO_T/audit.jsonl" "$JO_T/gone.txt" "$JO_T/left.txt" <<'PY' || jo_die "killed run: the audit misses deletions"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
keys = {l["key"] for l in lines}
gone = [k.strip() for k in open(sys.argv[2]) if k.strip()]
left = {k.strip() for k in open(sys.argv[3]) if k.strip()}
missing = [k for k in gone if k not in keys]
assert not missing, "%d deleted objects without an audit line, e.g. %s" % (len(missing), missing[:3])
lies = [l["key"] for l in lines if l["result"] == "deleted" and l["key"] in left]
assert not lies, "audited as deleted but still there: %s" % lies[:3]
PY
[ -f "$OBJS/$live" ] || jo_die "killed run: the live block was deleted"

# 3. the rerun finishes
rc=0
"$JO_BIN" leakcheck "$META" --delete-from "$JO_T/cands.jsonl" --audit "$JO_T/audit.jsonl" --json \
	>"$JO_T/rerun.json" 2>"$JO_T/rerun.err" || rc=$?
cat "$JO_T/rerun.err" >&2
[ $rc = 0 ] || jo_die "rerun: exit $rc"
[ -z "$(planted)" ] || jo_die "rerun: $(planted | wc -l) leaks left"
[ "$(jq -r 'select(.type == "summary") | .deleted' "$JO_T/rerun.json")" = "$(wc -l <"$JO_T/left.txt")" ] ||
	jo_die "rerun: summary $(cat "$JO_T/rerun.json"), $(wc -l <"$JO_T/left.txt") were left"
"$JO_VENV/bin/python" - "$JO_T/audit.jsonl" "$JO_T/all.txt" <<'PY' || jo_die "rerun: the audit is incomplete"
import json, sys
final = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["result"] != "deleting":
        final[r["key"]] = r["result"]
bad = [k.strip() for k in open(sys.argv[2])
       if final.get(k.strip()) not in ("deleted", "kept: already gone")]
assert not bad, "no final audit line for %d keys, e.g. %s" % (len(bad), bad[:3])
PY
[ -f "$OBJS/$live" ] || jo_die "rerun: the live block was deleted"
"$JO_BIN" cat "$META" /f1 | cmp -s - "$JO_T/src/f1" || jo_die "jfsops cat /f1 differs"
echo "leakcheck delete killed: ok"
