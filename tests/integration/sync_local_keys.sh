#!/usr/bin/env bash
# tests/integration/sync_local_keys.sh: a local DST never folds two keys
# into one file, never lets a key out of DST, and sets modes as documented.
#
# Ports: JO_PORT_BASE+1 Redis, +10..+13 SeaweedFS (gRPC +10000), +20 the S3 shim.
#
# SeaweedFS cannot store the odd keys (it refuses "." and ".." segments and
# folds "a//b" and "/a" into "a/b" and "a"; AWS keeps them), so the shim in
# front of it shows them, each backed by an ordinary object of other bytes
# (tests/tools/s3shim.py, aliases). SRC then lists "dot.txt" and
# "./dot.txt", "a/b.txt" and "a//b.txt", "abs.txt" and "/abs.txt", "x/./y",
# "../up.txt", "q/../../esc.txt", a non-empty "dir/", a ".jfs.*.tmp.*" name
# and a key with an ESC byte and an empty segment, next to a real directory
# marker "mark/". Checks:
#  - sync to a local DST: exit 4, "unrepresentable": 9 in --json, the text
#    summary counts them, one stderr line per refused key (the ESC byte
#    shown as \033 as ls -b does, never raw), the 5 good keys copied with their own
#    bytes (no odd object's bytes in any file), the marker a directory,
#    nothing written outside DST;
#  - a rerun: exit 4 again, copies 0, refuses the same 9, the tree byte for
#    byte the same; a --dry-run says the same;
#  - --delete-dst with an extra file in DST: refused, nothing deleted;
#  - the same keys excluded by filters: exit 0, and --delete-dst deletes;
#  - --cluster: each refused key is a failed object of its range, the job
#    ends "failed" (exit 4), the good keys are copied, nothing is deleted;
#  - modes (local -> local): by default 0666 less the umask (umask 022 and
#    027), whatever the source's bits; with --perms the source's rwx bits,
#    never setuid/setgid/sticky, for one-request and multipart copies;
#    --perms with an s3 DST is a usage error, with an s3 SRC a warning and
#    the default mode.
. "$(dirname "$0")/lib/init.sh"
J=${JFSOPS_BIN:-$JO_REPO/build/jfsops}
[ -x "$J" ] || jo_die "jfsops binary $J not found (set JFSOPS_BIN or build first)"
PY=$JO_VENV/bin/python
S3U=$JO_REPO/tests/tools/s3util.py
jv() { "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]])' "$1" "$2"; }
tree_digest() {
	(cd "$1" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) | sha256sum
}

start_seaweed $((JO_PORT_BASE + 10)) swak swsk
start_s3_shim $((JO_PORT_BASE + 20)) "$JO_S3_ENDPOINT"
SW=$JO_S3_ENDPOINT
export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
export JFSOPS_DST_ACCESS_KEY=swak JFSOPS_DST_SECRET_KEY=swsk

W=$JO_T/w
mkdir -p "$W"

# ---- the bucket -------------------------------------------------------------
s3_mkbucket keys
put() { printf '%s' "$2" >"$JO_T/obj"; "$PY" "$S3U" put "$SW" swak swsk keys "$1" "$JO_T/obj"; }
for k in dot.txt a/b.txt abs.txt sub/ok.txt top.txt; do put "$k" "good:$k"; done
put mark/ ""                           # a directory marker (zero bytes)
for i in 1 2 3 4 5 6 7 8 9; do put "odd/$i" "ODD$i"; done
ESC=$'\x1b'
"$PY" - "$JO_T/aliases.json" "$ESC" <<'EOF'
import json, sys
esc = sys.argv[2]
keys = {"./dot.txt": "odd/1", "a//b.txt": "odd/2", "/abs.txt": "odd/3", "x/./y.txt": "odd/4",
        "../up.txt": "odd/5", "q/../../esc.txt": "odd/6", "dir/": "odd/7",
        "sub/.jfs.ok.txt.tmp.1": "odd/8", "c/" + esc + "[31mred//x": "odd/9"}
json.dump({"bucket": "keys", "access_key": "swak", "secret_key": "swsk", "keys": keys},
          open(sys.argv[1], "w"))
EOF
shim_aliases "$(cat "$JO_T/aliases.json")"
# the shim shows them: a listing through it (url-encoded: an ESC byte is no
# XML) has the odd keys, not odd/N
"$PY" - "$JO_SHIM_ENDPOINT" "$JO_REPO/tests/tools" >"$W/list" <<'EOF' || jo_die "cannot list through the shim"
import sys
sys.path.insert(0, sys.argv[2])
import s3util
print(s3util.request(sys.argv[1], "swak", "swsk", "GET", "keys",
                     query={"list-type": "2", "encoding-type": "url"}).decode())
EOF
for k in ./dot.txt a//b.txt /abs.txt ../up.txt c/%1B%5B31mred//x; do
	grep -qF "<Key>$k</Key>" "$W/list" || jo_die "the shim does not show \"$k\": $(cat "$W/list")"
done
! grep -q '<Key>odd/' "$W/list" || jo_die "the shim lists odd/N: $(cat "$W/list")"
[ "$("$PY" "$S3U" get "$JO_SHIM_ENDPOINT" swak swsk keys a//b.txt)" = ODD2 ] ||
	jo_die "the shim does not serve a//b.txt"

SRC="s3://keys?endpoint=$JO_SHIM_ENDPOINT&path_style=1&unordered=1"
D=$W/dst
outside_before=$(find "$JO_T" -maxdepth 1 | LC_ALL=C sort)

check_run() { # NAME OUT ERR RC: the refusals of one run
	local name=$1 out=$2 err=$3 rc=$4 k
	[ "$rc" = 4 ] || jo_die "$name: exit $rc, want 4: $(tail -n 5 "$err")"
	[ "$(jv "$out" unrepresentable)" = 9 ] || jo_die "$name: unrepresentable $(jv "$out" unrepresentable), want 9: $(cat "$out")"
	[ "$(grep -c '^jfsops sync: warning: refused "' "$err")" = 9 ] ||
		jo_die "$name: want 9 refusal lines: $(cat "$err")"
	grep -q '9 SRC keys refused: not representable on a local filesystem' "$err" ||
		jo_die "$name: the text summary does not count them: $(cat "$err")"
	for k in './dot.txt' 'a//b.txt' '/abs.txt' 'x/./y.txt' '../up.txt' 'q/../../esc.txt' 'dir/' \
		'sub/.jfs.ok.txt.tmp.1' 'c/\033[31mred//x'; do
		grep -qF "refused \"$k\"" "$err" || jo_die "$name: no refusal line for \"$k\": $(cat "$err")"
	done
	! grep -q "$ESC" "$err" || jo_die "$name: a raw ESC byte on stderr"
}

# ---- 1. the first run ----------------------------------------------------------
rc=0
"$J" sync -q --json --state "$W/state.db" "$SRC" "$D" >"$W/out1" 2>"$W/err1" || rc=$?
check_run "first run" "$W/out1" "$W/err1" $rc
[ "$(jv "$W/out1" copied)" = 5 ] || jo_die "first run: copied $(jv "$W/out1" copied), want 5"
for k in dot.txt a/b.txt abs.txt sub/ok.txt top.txt; do
	[ "$(cat "$D/$k")" = "good:$k" ] || jo_die "first run: $k holds '$(cat "$D/$k")', want good:$k"
done
[ ! -f "$D/mark" ] || jo_die "the directory marker mark/ became a file"
! grep -rq ODD "$D" || jo_die "an odd key's bytes landed in DST: $(grep -rl ODD "$D")"
[ "$(cd "$D" && find . -type f | LC_ALL=C sort | tr '\n' ' ')" = "./a/b.txt ./abs.txt ./dot.txt ./sub/ok.txt ./top.txt " ] ||
	jo_die "DST holds other files: $(cd "$D" && find . | LC_ALL=C sort)"
[ "$(find "$JO_T" -maxdepth 1 | LC_ALL=C sort)" = "$outside_before" ] && [ ! -e "$W/up.txt" ] && [ ! -e "$JO_T/esc.txt" ] ||
	jo_die "something was written outside DST"
echo "ok   - first run: 5 copied, 9 refused (exit 4), one line each, nothing folded or outside"
digest1=$(tree_digest "$D")

# ---- 2. reruns ------------------------------------------------------------------
rc=0
"$J" sync -q --json --state "$W/state.db" "$SRC" "$D" >"$W/out2" 2>"$W/err2" || rc=$?
check_run "rerun" "$W/out2" "$W/err2" $rc
[ "$(jv "$W/out2" copied)" = 0 ] && [ "$(jv "$W/out2" skipped)" = 5 ] ||
	jo_die "rerun: copied $(jv "$W/out2" copied), skipped $(jv "$W/out2" skipped); want 0 and 5"
[ "$(tree_digest "$D")" = "$digest1" ] || jo_die "rerun: DST changed"
rc=0
"$J" sync -q --json --no-state "$SRC" "$D" >"$W/out3" 2>"$W/err3" || rc=$?
check_run "rerun without the state file" "$W/out3" "$W/err3" $rc
[ "$(jv "$W/out3" copied)" = 0 ] || jo_die "rerun without state: copied $(jv "$W/out3" copied), want 0"
rc=0
"$J" sync -q --dry-run --json --state "$W/state.db" "$SRC" "$D" >"$W/out4" 2>"$W/err4" || rc=$?
check_run "dry run" "$W/out4" "$W/err4" $rc
[ "$(jv "$W/out4" would_copy)" = 0 ] || jo_die "dry run: would copy $(jv "$W/out4" would_copy)"
[ "$(tree_digest "$D")" = "$digest1" ] || jo_die "reruns changed DST"
echo "ok   - reruns (state, no state, dry run): 0 copied, the same 9 refused, DST unchanged"

# ---- 3. --delete-dst -------------------------------------------------------------
echo extra >"$D/extra.txt"
rc=0
"$J" sync -q --json --delete-dst --state "$W/state.db" "$SRC" "$D" >"$W/out5" 2>"$W/err5" || rc=$?
check_run "--delete-dst" "$W/out5" "$W/err5" $rc
[ -e "$D/extra.txt" ] && [ "$(jv "$W/out5" deleted)" = 0 ] && [ "$(jv "$W/out5" delete_refused)" = True ] ||
	jo_die "--delete-dst deleted with refused keys: $(cat "$W/out5")"
grep -q 'deletions NOT done: 9 SRC keys are not representable' "$W/err5" ||
	jo_die "--delete-dst: no line says why nothing was deleted: $(cat "$W/err5")"
echo "ok   - --delete-dst with refused keys deletes nothing (extra.txt kept)"
# the odd keys excluded: nothing refused, deletions run
rc=0
"$J" sync -q --json --delete-dst --state "$W/state.db" --include /dot.txt --include /a/b.txt \
	--include /abs.txt --include /sub/ok.txt --include /top.txt --include /extra.txt \
	"$SRC" "$D" >"$W/out6" 2>"$W/err6" || rc=$?
[ $rc = 0 ] && [ "$(jv "$W/out6" unrepresentable)" = 0 ] && [ "$(jv "$W/out6" deleted)" = 1 ] && [ ! -e "$D/extra.txt" ] ||
	jo_die "excluded odd keys: exit $rc, $(cat "$W/out6") $(cat "$W/err6")"
echo "ok   - with the odd keys excluded: exit 0, --delete-dst deletes"

# ---- 4. --cluster: a refused key is a failed object, the job ends failed ----------
# One range: the shim shows the odd keys where upstream lists odd/N, so a
# listing that starts after a key (a range's start) would not be faithful.
start_redis $((JO_PORT_BASE + 1))
D2=$W/cdst
mkdir -p "$D2" && echo extra >"$D2/extra.txt"
rc=0
"$J" sync -q --json --delete-dst --max-attempts 1 --ranges 1 --cluster "redis://127.0.0.1:$JO_REDIS_PORT/2" \
	"$SRC" "$D2" >"$W/outc" 2>"$W/errc" || rc=$?
[ $rc = 4 ] || jo_die "--cluster: exit $rc, want 4: $(tail -n 5 "$W/errc")"
[ "$(grep -c '^jfsops sync: warning: refused "' "$W/errc")" = 9 ] || jo_die "--cluster: want 9 refusal lines: $(cat "$W/errc")"
[ "$(jv "$W/outc" status)" = failed ] && [ -e "$D2/extra.txt" ] && [ "$(jv "$W/outc" deleted)" = 0 ] ||
	jo_die "--cluster: the job did not end failed, or it deleted: $(cat "$W/outc")"
for k in dot.txt a/b.txt abs.txt sub/ok.txt top.txt; do
	[ "$(cat "$D2/$k")" = "good:$k" ] || jo_die "--cluster: $k holds '$(cat "$D2/$k" 2>&1)'"
done
! grep -rq ODD "$D2" || jo_die "--cluster: an odd key's bytes landed in DST"
echo "ok   - --cluster: 9 refused as failed objects, the job ends failed (exit 4), nothing deleted"

# ---- 5. modes -------------------------------------------------------------------
S=$W/msrc
mkdir -p "$S/d"
printf a >"$S/f600" && chmod 600 "$S/f600"
printf b >"$S/f755" && chmod 755 "$S/f755"
printf c >"$S/d/f640" && chmod 640 "$S/d/f640"
printf d >"$S/suid" && chmod 4755 "$S/suid"
head -c $((6 << 20)) /dev/urandom >"$S/big700" && chmod 700 "$S/big700"
modes() { (cd "$1" && for f in f600 f755 d/f640 suid big700; do printf '%s=%s ' "$f" "$(stat -c %a "$f")"; done); }
rc=0
(umask 022 && "$J" sync -q --no-state --multipart-threshold 5M --part-size 5M "$S" "$W/m1") 2>"$W/errm" || rc=$?
[ $rc = 0 ] || jo_die "default modes: exit $rc: $(cat "$W/errm")"
[ "$(modes "$W/m1")" = "f600=644 f755=644 d/f640=644 suid=644 big700=644 " ] ||
	jo_die "default modes under umask 022: $(modes "$W/m1")"
rc=0
(umask 027 && "$J" sync -q --no-state --multipart-threshold 5M --part-size 5M "$S" "$W/m2") 2>"$W/errm" || rc=$?
[ $rc = 0 ] && [ "$(modes "$W/m2")" = "f600=640 f755=640 d/f640=640 suid=640 big700=640 " ] ||
	jo_die "default modes under umask 027: exit $rc, $(modes "$W/m2")"
echo "ok   - default: 0666 less the umask (022, 027), whatever the source's bits"
rc=0
(umask 022 && "$J" sync -q --no-state --perms --multipart-threshold 5M --part-size 5M "$S" "$W/m3") 2>"$W/errm" || rc=$?
[ $rc = 0 ] || jo_die "--perms: exit $rc: $(cat "$W/errm")"
[ "$(modes "$W/m3")" = "f600=600 f755=755 d/f640=640 suid=755 big700=700 " ] ||
	jo_die "--perms modes: $(modes "$W/m3")"
cmp -s "$S/big700" "$W/m3/big700" || jo_die "--perms: the multipart copy differs"
echo "ok   - --perms: the source's rwx bits (one-request and multipart), never setuid"
rc=0
"$J" sync -q --no-state --perms "$S" "s3://keys/m?endpoint=$SW&path_style=1" 2>"$W/errm" || rc=$?
[ $rc = 2 ] && grep -q -- '--perms is for a local DST' "$W/errm" || jo_die "--perms to s3: exit $rc: $(cat "$W/errm")"
rc=0
(umask 022 && "$J" sync -q --no-state --perms "s3://keys/sub?endpoint=$SW&path_style=1" "$W/m4") 2>"$W/errm" || rc=$?
[ $rc = 0 ] && grep -q -- '--perms: the objects of SRC .* carry no permission bits' "$W/errm" &&
	[ "$(stat -c %a "$W/m4/ok.txt")" = 644 ] || jo_die "--perms from s3: exit $rc, $(cat "$W/errm")"
echo "ok   - --perms: an s3 DST is a usage error, an s3 SRC gives the default mode (with a warning)"

echo "$(basename "$0"): ok"
