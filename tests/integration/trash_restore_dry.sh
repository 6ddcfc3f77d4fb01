#!/usr/bin/env bash
# jfsops trash restore, dry run, on each engine of JO_ENGINES (default:
# SQLite, Redis, PostgreSQL, MariaDB and etcd): trees removed through a juicefs mount with --trash-days 1
# (rm -rf, so directories land in the trash after their children), a name
# taken again after its removal, a parent removed after its child. The plan
# must put every directory before the entries that were in it, send each
# entry back to its original path, skip a taken name (--conflict skip, the
# default) or rename it NAME.restored-TIME (--conflict rename), skip an entry
# whose parent stays in the trash unless --into DIR, and nothing in the
# volume changes (juicefs dump before and after are equal).
. "$(dirname "$0")/lib/init.sh" engines

# plan OUT ARGS...: `trash restore META --json ARGS` into OUT (must exit 0)
plan() {
	local out=$1
	shift
	"$JO_BIN" trash restore "$meta" --json "$@" >"$out" 2>"$out.err" ||
		{ cat "$out.err" >&2; jo_die "$e: trash restore $* failed"; }
}

for e in ${JO_ENGINES:-sqlite3 redis postgres mysql etcd}; do
	mp=$JO_T/mnt-$e
	engine_volume "$e" "trrs$e" "$mp" --no-bgjob # the mount must not empty the trash
	mkdir -p "$mp/a/b/c" "$mp/d" "$mp/keep"
	jo_random_files "$mp" a/b/f1:5000 a/b/c/f2:300 top.txt:1000 d/h:10
	rm -rf "$mp/a/b"
	rm "$mp/top.txt"
	echo new >"$mp/top.txt"   # the name is taken again
	rm "$mp/d/h"
	rmdir "$mp/d"             # the parent follows its child into the trash
	jfs_umount "$mp"
	"$JUICEFS" dump --no-agent "$meta" "$JO_T/before-$e.json" >/dev/null 2>&1 || jo_die "$e: juicefs dump failed"

	plan "$JO_T/all-$e.json"
	plan "$JO_T/ren-$e.json" --conflict rename
	plan "$JO_T/h-$e.json" --path /d/h
	plan "$JO_T/hinto-$e.json" --path /d/h --into /keep
	plan "$JO_T/sub-$e.json" --path /a/b/c
	python3 - "$JO_T" "$e" <<'PY' || jo_die "$e: trash restore plans are not as expected"
import json, re, sys
T, eng = sys.argv[1], sys.argv[2]
def load(n):
    ls = [json.loads(l) for l in open(f"{T}/{n}-{eng}.json")]
    assert ls[-1]["type"] == "summary" and ls[-1]["command"] == "trash" and ls[-1]["dry_run"], ls[-1]
    return [o for o in ls if o["type"] == "restore"], ls[-1]
def fail(msg):
    print(f"{eng}: {msg}", file=sys.stderr); sys.exit(1)
rs, s = load("all")
order = [o["path"] for o in rs]
by = {o["path"]: o for o in rs}
if sorted(order) != sorted(["/a/b", "/a/b/c", "/a/b/c/f2", "/a/b/f1", "/top.txt", "/d", "/d/h"]):
    fail(f"all: paths {order}")
for parent, child in [("/a/b", "/a/b/c"), ("/a/b", "/a/b/f1"), ("/a/b/c", "/a/b/c/f2"), ("/d", "/d/h")]:
    if order.index(parent) > order.index(child):
        fail(f"all: {child} planned before its parent {parent}: {order}")
for p in ["/a/b", "/a/b/c", "/a/b/c/f2", "/a/b/f1", "/d", "/d/h"]:
    if by[p]["action"] != "would-restore" or by[p]["target"] != p:
        fail(f"all: {p}: {by[p]}")
if by["/top.txt"]["action"] != "skip" or "taken" not in by["/top.txt"]["reason"]:
    fail(f"all: /top.txt: {by['/top.txt']}")
if (s["selected"], s["would_restore"], s["skipped"], s["conflicts"]) != (7, 6, 1, 1):
    fail(f"all: summary {s}")
if s["bytes"] != 5000 + 300 + 10 + 3 * 4096:
    fail(f"all: bytes {s['bytes']}")
rs, s = load("ren")
t = {o["path"]: o for o in rs}["/top.txt"]
if t["action"] != "would-restore" or not re.fullmatch(r"/top\.txt\.restored-\d{8}T\d{6}Z", t["target"]):
    fail(f"rename: /top.txt: {t}")
rs, s = load("h")
if len(rs) != 1 or rs[0]["action"] != "skip" or "trash" not in rs[0]["reason"]:
    fail(f"--path /d/h: {rs}")
rs, s = load("hinto")
if len(rs) != 1 or rs[0]["action"] != "would-restore" or rs[0]["target"] != "/keep/h":
    fail(f"--path /d/h --into /keep: {rs}")
rs, s = load("sub")
if [(o["path"], o["action"]) for o in rs] != [("/a/b/c", "skip"), ("/a/b/c/f2", "skip")]:
    fail(f"--path /a/b/c (its parent /a/b stays in the trash): {rs}")
PY
	# human output
	"$JO_BIN" trash restore "$meta" >"$JO_T/human-$e" || jo_die "$e: trash restore (human) failed"
	grep -q "^dry run: would restore 6 of 7 entries" "$JO_T/human-$e" ||
		{ cat "$JO_T/human-$e" >&2; jo_die "$e: human summary line"; }
	# refused: --audit without --apply, --into that is not a directory
	rc=0; "$JO_BIN" trash restore "$meta" --audit "$JO_T/audit-$e" >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || jo_die "$e: trash restore --audit without --apply exit $rc, expected 2"
	rc=0; "$JO_BIN" trash restore "$meta" --into /nothere >/dev/null 2>&1 || rc=$?
	[ "$rc" = 8 ] || jo_die "$e: --into /nothere exit $rc, expected 8"
	rc=0; "$JO_BIN" trash restore "$meta" --conflict overwrite >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || jo_die "$e: --conflict overwrite exit $rc, expected 2"
	rc=0; "$JO_BIN" trash ls "$meta" --into /keep >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || jo_die "$e: trash ls --into exit $rc, expected 2"
	"$JUICEFS" dump --no-agent "$meta" "$JO_T/after-$e.json" >/dev/null 2>&1 || jo_die "$e: juicefs dump failed"
	cmp -s "$JO_T/before-$e.json" "$JO_T/after-$e.json" || jo_die "$e: the dry run changed the volume"
	jo_log "$e: trash restore (dry run) ok"
done
echo "trash_restore_dry: ok"
