#!/usr/bin/env bash
# jfsops trash ls on each engine of JO_ENGINES (default: SQLite, Redis,
# PostgreSQL, MariaDB and etcd): a volume with --trash-days 1, a tree written and removed through a juicefs
# mount (rm -rf of a nested tree: its directories land in the trash after
# their children, so each child's parent is itself in the trash; a file owned
# by another uid; a single file), then the listing is checked: every entry of
# the mount's .trash is listed once with its original path, type, size and
# inode; the totals per hour directory add up; --path (with and without a
# trailing slash, a sibling prefix that must not match), --uid, --name,
# --since/--until (ages and RFC 3339) select exactly what they should; the
# volume is unchanged (a dump before and after is equal). Then two hour
# directories with a parent removed hours after its child: the path climbs
# across hours and --since/--until split them.
. "$(dirname "$0")/lib/init.sh" engines

# check_sel NAME EXPECTED_PATHS(space-separated, sorted) ARGS...: the paths
# `trash ls --json ARGS` lists are exactly EXPECTED.
check_sel() {
	local what=$1 want=$2 got
	shift 2
	"$JO_BIN" trash ls "$meta" --json "$@" >"$JO_T/sel.json" 2>"$JO_T/sel.err" ||
		{ cat "$JO_T/sel.err" >&2; jo_die "$e: trash ls $what failed"; }
	got=$(python3 -c '
import json, sys
print(" ".join(sorted(o["path"] for o in map(json.loads, open(sys.argv[1])) if o["type"] == "entry")))
' "$JO_T/sel.json")
	[ "$got" = "$want" ] || jo_die "$e: trash ls $what lists '$got', expected '$want'"
}

for e in ${JO_ENGINES:-sqlite3 redis postgres mysql etcd}; do
	mp=$JO_T/mnt-$e
	engine_volume "$e" "trls$e" "$mp" --no-bgjob # the mount must not empty the trash
	mkdir -p "$mp/a/b/c" "$mp/a/bb" "$mp/keep"
	jo_random_files "$mp" a/b/f1:100000 a/b/c/f2.csv:3000 a/bb/f3:777 top.txt:4242
	echo keep >"$mp/keep/k"
	chown 1234:1234 "$mp/a/b/c/f2.csv"
	f1_ino=$(stat -c %i "$mp/a/b/f1")
	rm "$mp/top.txt"
	rm -rf "$mp/a/b" "$mp/a/bb/f3"
	# what the mount's own view of the trash holds
	find "$mp/.trash" -mindepth 2 -maxdepth 2 | sort >"$JO_T/mnt-trash-$e"
	nmnt=$(wc -l <"$JO_T/mnt-trash-$e")
	[ "$nmnt" = 6 ] || { cat "$JO_T/mnt-trash-$e" >&2; jo_die "$e: expected 6 entries in the mount's .trash, found $nmnt"; }
	hours=$(ls "$mp/.trash")
	jfs_umount "$mp"
	python3 "$JO_REPO/tests/tools/sqlmeta.py" --help >/dev/null 2>&1 || true
	"$JUICEFS" dump --no-agent "$meta" "$JO_T/before-$e.json" >/dev/null 2>&1 || jo_die "$e: juicefs dump failed"

	"$JO_BIN" trash ls "$meta" --json >"$JO_T/all-$e.json" 2>"$JO_T/all-$e.err" ||
		{ cat "$JO_T/all-$e.err" >&2; jo_die "$e: trash ls --json failed"; }
	python3 - "$JO_T/all-$e.json" "$JO_T/mnt-trash-$e" "$mp" "$f1_ino" "$hours" "$e" <<'PY' || jo_die "$e: trash ls --json disagrees with the mount's .trash"
import json, os, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
mnt = [l.strip() for l in open(sys.argv[2])]
mp, f1_ino, hours, eng = sys.argv[3], int(sys.argv[4]), sys.argv[5].split(), sys.argv[6]
ents = [o for o in lines if o["type"] == "entry"]
hrs = [o for o in lines if o["type"] == "hour"]
summ = [o for o in lines if o["type"] == "summary"]
def fail(msg):
    print(f"{eng}: {msg}", file=sys.stderr); sys.exit(1)
if len(summ) != 1 or lines[-1]["type"] != "summary":
    fail("not exactly one summary, last")
s = summ[0]
if s["command"] != "trash" or s["entries"] != 6 or s["exit"] != 0 or not s["complete"]:
    fail(f"summary {s}")
# every entry of the mount's .trash, once, by hour dir and name
want = sorted(os.path.relpath(p, mp + "/.trash") for p in mnt)
got = sorted(f'{o["hour"]}/{o["parent"]}-{o["inode"]}-{o["path"].rsplit("/", 1)[1]}' for o in ents)
if want != got:
    fail(f"entries {got} != mount's {want}")
paths = {o["path"]: o for o in ents}
exp = {"/top.txt": ("file", 4242), "/a/b": ("dir", None), "/a/b/f1": ("file", 100000),
       "/a/b/c": ("dir", None), "/a/b/c/f2.csv": ("file", 3000), "/a/bb/f3": ("file", 777)}
if sorted(paths) != sorted(exp):
    fail(f"paths {sorted(paths)}")
for p, (kind, size) in exp.items():
    if paths[p]["kind"] != kind or (size is not None and paths[p]["size"] != size):
        fail(f"{p}: {paths[p]}")
if paths["/a/b/f1"]["inode"] != f1_ino:
    fail(f"/a/b/f1 inode {paths['/a/b/f1']['inode']} != {f1_ino}")
if paths["/a/b/c/f2.csv"]["uid"] != 1234:
    fail("f2.csv uid")
# totals per hour directory
if sorted(h["hour"] for h in hrs) != sorted(hours):
    fail(f"hours {hrs} != {hours}")
for h in hrs:
    mine = [o for o in ents if o["hour"] == h["hour"]]
    if h["entries"] != len(mine) or h["bytes"] != sum(o["size"] for o in mine):
        fail(f"hour total {h}")
if s["bytes"] != sum(o["size"] for o in ents):
    fail("summary bytes")
PY
	all="/a/b /a/b/c /a/b/c/f2.csv /a/b/f1 /a/bb/f3 /top.txt"
	check_sel "--path /a/b" "/a/b /a/b/c /a/b/c/f2.csv /a/b/f1" --path /a/b
	check_sel "--path /a/b/" "/a/b /a/b/c /a/b/c/f2.csv /a/b/f1" --path /a/b/
	check_sel "--path /a/bb" "/a/bb/f3" --path /a/bb
	check_sel "--path /a/b/c" "/a/b/c /a/b/c/f2.csv" --path /a/b/c
	check_sel "--path /" "$all" --path /
	check_sel "--path /nothere" "" --path /nothere
	check_sel "--uid 1234" "/a/b/c/f2.csv" --uid 1234
	check_sel "--uid 0" "/a/b /a/b/c /a/b/f1 /a/bb/f3 /top.txt" --uid 0
	check_sel "--name '*.csv'" "/a/b/c/f2.csv" --name '*.csv'
	check_sel "--name 'f?'" "/a/b/f1 /a/bb/f3" --name 'f?'
	check_sel "--since 1h" "$all" --since 1h
	check_sel "--until 1h" "" --until 1h
	check_sel "--since future" "" --since "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
	check_sel "--since past (offset)" "$all" --since "$(date -d '-1 hour' +%Y-%m-%dT%H:%M:%S+00:00 -u)"
	check_sel "--until future" "$all" --until "$(date -u -d '+10 minutes' +%Y-%m-%dT%H:%M:%S.5Z)"
	check_sel "combined" "/a/b/f1" --path /a/b --name 'f*' --uid 0 --since 2h
	# human output: one line per entry, a total per hour, a final total
	"$JO_BIN" trash ls "$meta" >"$JO_T/human-$e" || jo_die "$e: trash ls failed"
	[ "$(grep -c ' /' "$JO_T/human-$e")" = 6 ] || { cat "$JO_T/human-$e" >&2; jo_die "$e: human listing has not 6 entry lines"; }
	grep -q "^total: 6 entries, $((100000 + 3000 + 777 + 4242 + 2 * 4096)) bytes" "$JO_T/human-$e" ||
		{ cat "$JO_T/human-$e" >&2; jo_die "$e: human total line"; }
	# bad arguments are usage errors
	for bad in "--since yesterday" "--until 2026-13-01T00:00:00Z" "--uid -1" "--path rel"; do
		# shellcheck disable=SC2086
		rc=0; "$JO_BIN" trash ls "$meta" $bad >/dev/null 2>&1 || rc=$?
		[ "$rc" = 2 ] || jo_die "$e: trash ls $bad: exit $rc, expected 2"
	done
	# read-only: the volume is as it was
	"$JUICEFS" dump --no-agent "$meta" "$JO_T/after-$e.json" >/dev/null 2>&1 || jo_die "$e: juicefs dump failed"
	cmp -s "$JO_T/before-$e.json" "$JO_T/after-$e.json" || jo_die "$e: trash ls changed the volume"
	jo_log "$e: trash ls ok"
done

# Two hours, a parent removed later than its child (SQLite only: the first
# hour directory is renamed in the database to three hours earlier, as if
# the child had been removed then; juicefs stamps hours with its own clock).
meta="sqlite3://$JO_T/hours.db"
e=sqlite3-hours
mp=$JO_T/mnt-hours
jfs_format "$meta" "$JO_T/bucket-hours" trlshours --trash-days 1
jfs_mount "$meta" "$mp" --no-bgjob
mkdir -p "$mp/p/q"
head -c 1234 /dev/urandom >"$mp/p/q/f"
rm "$mp/p/q/f"
jfs_umount "$mp"
old_hour=$(date -u -d '-3 hours' +%Y-%m-%d-%H)
python3 - "$JO_T/hours.db" "$old_hour" <<'PY' || jo_die "$e: cannot rename the hour directory"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT name FROM jfs_edge WHERE parent = ?", (0x7FFFFFFF10000000,)).fetchall()
assert len(rows) == 1, rows
db.execute("UPDATE jfs_edge SET name = ? WHERE parent = ?", (sys.argv[2].encode(), 0x7FFFFFFF10000000))
db.commit()
PY
jfs_mount "$meta" "$mp" --no-bgjob
rm -rf "$mp/p/q"
[ "$(ls "$mp/.trash" | wc -l)" = 2 ] || jo_die "$e: expected two hour directories in the mount's .trash"
jfs_umount "$mp"
check_sel "all" "/p/q /p/q/f"
check_sel "--until 2h" "/p/q/f" --until 2h
check_sel "--since 2h" "/p/q" --since 2h
check_sel "--path /p/q --since 4h --until 2h" "/p/q/f" --path /p/q --since 4h --until 2h
"$JO_BIN" trash ls "$meta" --json >"$JO_T/hours.json" || jo_die "$e: trash ls failed"
python3 - "$JO_T/hours.json" "$old_hour" <<'PY' || jo_die "$e: hour totals or deletion times are wrong"
import json, sys, time
ls = [json.loads(l) for l in open(sys.argv[1])]
hrs = [(o["hour"], o["entries"], o["bytes"]) for o in ls if o["type"] == "hour"]
assert len(hrs) == 2 and hrs[0] == (sys.argv[2], 1, 1234) and hrs[1][1:] == (1, 4096), hrs
f = [o for o in ls if o["type"] == "entry" and o["path"] == "/p/q/f"][0]
# the entry's ctime is not in its (renamed) hour: the hour's start is its deletion time
assert f["deleted_at"] == time.strftime("%Y-%m-%dT%H:00:00Z", time.strptime(sys.argv[2], "%Y-%m-%d-%H")), f
PY
# a name that is not UTF-8 and holds a newline: JSON and human output show
# it escaped as ls -b does, on one line
jfs_mount "$meta" "$mp" --no-bgjob
odd=$(printf 'odd\377\nname.')
: >"$mp/$odd"
rm "$mp/$odd"
jfs_umount "$mp"
"$JO_BIN" trash ls "$meta" --json --name 'odd*' >"$JO_T/odd.json" || jo_die "$e: trash ls of an odd name failed"
python3 - "$JO_T/odd.json" <<'PY' || jo_die "$e: the odd name is not listed escaped in JSON"
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
assert [o["path"] for o in ls if o["type"] == "entry"] == ["/odd\\377\\nname."], ls
PY
"$JO_BIN" trash ls "$meta" --name 'odd*' >"$JO_T/odd.txt" || jo_die "$e: trash ls of an odd name failed"
grep -qF '/odd\377\nname.' "$JO_T/odd.txt" || { cat -A "$JO_T/odd.txt" >&2; jo_die "$e: the odd name is not escaped in human output"; }
jo_log "$e: trash ls ok"
echo "trash_ls: ok"
