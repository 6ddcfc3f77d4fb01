#!/usr/bin/env bash
# The recipes of docs/usage-export.md, run as written (tests/tools/recipes.py
# extracts them, the example addresses are replaced by a test volume's): the
# Sunday full export and the weekday incremental one, run the way cron runs
# them (/bin/sh -c, minimal environment), then the DuckDB script that loads
# the full export, applies the increment and asks the two clean-up questions.
# Its answers must equal what the mount shows: cold bytes per top-level
# directory, and the largest files untouched for a year, path by path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup
PY=$JO_VENV/bin/python
MD=$JO_REPO/docs/usage-export.md
start_redis $((JO_PORT_BASE + 0))
META="redis://127.0.0.1:$JO_REDIS_PORT/1"
jfs_format "$META" "$JO_T/bucket" recipe-vol --trash-days 1
mnt=$JO_T/mnt
jfs_mount "$META" "$mnt"
now=$(date +%s)
age() { touch -m -d "@$((now - $2 * 86400))" "$1"; touch -a -d "@$((now - $3 * 86400))" "$1"; }
mkdir -p "$mnt/a" "$mnt/b" "$mnt/c"
head -c 300000 /dev/urandom >"$mnt/a/big-old"; age "$mnt/a/big-old" 400 400
head -c 1000 /dev/urandom >"$mnt/a/new"
head -c 50000 /dev/urandom >"$mnt/b/cold"; age "$mnt/b/cold" 100 100
head -c 60000 /dev/urandom >"$mnt/b/read"; age "$mnt/b/read" 400 10   # read 10 days ago
head -c 7000 /dev/urandom >"$mnt/b/hot"
head -c 12345 /dev/urandom >"$mnt/c/x"; age "$mnt/c/x" 500 500
ln "$mnt/c/x" "$mnt/c/y"
sync

h=$JO_T/host
mkdir -p "$h/lib/export" "$h/log"
printf '%s\t%s\n' \
	/usr/local/bin/jfsops "$JO_BIN" \
	redis://10.0.0.5:6379/1 "$META" \
	/var/lib/jfsops "$h/lib" \
	/var/log/jfsops "$h/log" \
	'$(date +\%F)' '$(date +\%F-\%H\%M\%S-\%N)' >"$JO_T/subst"
R=$JO_T/r
mkdir -p "$R"
python3 "$JO_REPO/tests/tools/recipes.py" "$MD" "$R" "$JO_T/subst" || jo_die "cannot extract the recipes of $MD"
grep -q "^export-cron crontab " "$R/index" || jo_die "no export-cron recipe in $MD"
grep -q "^export-duckdb sql " "$R/index" || jo_die "no export-duckdb recipe in $MD"
[ "$(wc -l <"$R/export-cron.jobs")" = 3 ] || jo_die "export-cron: $(wc -l <"$R/export-cron.jobs") jobs, want 3"

cron_run() { # N: job N of the crontab as cron runs it
	local envs=() line
	while IFS= read -r line; do envs+=("$line"); done <"$R/export-cron.env"
	env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$JO_T" SHELL=/bin/sh LOGNAME=jfsops \
		"${envs[@]}" /bin/sh -c "$(sed -n "${1}p" "$R/export-cron.jobs")"
}
cron_run 1 || { cat "$h/log/export.log" >&2; jo_die "the Sunday job failed"; }
full=$(ls -d "$h"/lib/export/2*/)
[ -f "$full/_SUCCESS" ] || jo_die "the Sunday job left no complete export"
# Monday's changes
rm "$mnt/b/hot"
head -c 4444 /dev/urandom >"$mnt/a/fresh"
mv "$mnt/c" "$mnt/d"
sync
sleep 1
cron_run 2 || { cat "$h/log/export.log" >&2; jo_die "the weekday job failed"; }
inc=$(ls -d "$h"/lib/export/2*/ | tail -n 1)
[ "$inc" != "$full" ] && [ -f "$inc/_SUCCESS" ] || jo_die "the weekday job left no complete export"
grep -q '"incremental": true' "$inc/_SUCCESS" || jo_die "the weekday export is not incremental"
cron_run 3 || jo_die "the clean-up job failed"
[ -d "$full" ] || jo_die "the clean-up job removed a fresh export"

sed -e "s|/var/lib/jfsops/export/2026-12-06|${full%/}|g" -e "s|/var/lib/jfsops/export/2026-12-07|${inc%/}|g" \
	"$R/export-duckdb" >"$JO_T/cleanup.sql"
sed -i "s|$h/lib/export/2026-12-06|${full%/}|g; s|$h/lib/export/2026-12-07|${inc%/}|g" "$JO_T/cleanup.sql"
"$PY" - "$JO_T/cleanup.sql" "$mnt" <<'EOF' || jo_die "the DuckDB recipe's answers differ from the mount"
import os, sys, time
import duckdb
sql, mnt = open(sys.argv[1]).read(), sys.argv[2]
con = duckdb.connect()
stmts = [s.strip() for s in sql.split(";") if s.strip() and not all(
    l.strip().startswith("--") or not l.strip() for l in s.strip().splitlines())]
results = [con.execute(s).fetchall() for s in stmts]
cold, largest = results[-2], results[-1]
now = time.time()
want_cold, want_large = {}, []
for dp, dn, fn in os.walk(mnt):
    rel = os.path.relpath(dp, mnt)
    if rel.startswith(".trash"):
        continue
    for f in fn:
        p = os.path.join(dp, f)
        if rel == "." and f in (".accesslog", ".config", ".stats"):
            continue
        st = os.lstat(p)
        last = max(st.st_atime, st.st_mtime)
        path = "/" + os.path.relpath(p, mnt)
        if now - last > 90 * 86400:
            top = path.split("/")[1]
            b, n = want_cold.get(top, (0, 0))
            want_cold[top] = (b + st.st_size, n + 1)
        if now - last > 365 * 86400:
            want_large.append((path, st.st_size))
got_cold = {r[0]: (int(r[1]), r[2]) for r in cold}
assert got_cold == want_cold, (got_cold, want_cold)
want_large.sort(key=lambda x: (-x[1], x[0]))
got_large = [(r[0], r[1]) for r in largest]
assert got_large == want_large, (got_large, want_large)
assert [c for c in got_cold] == sorted(got_cold, key=lambda k: -got_cold[k][0])
print("duckdb: cold %s; untouched for a year %s" % (got_cold, got_large))
EOF
echo "export_recipe: ok"
