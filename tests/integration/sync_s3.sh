#!/bin/bash
# tests/integration/sync_s3.sh: `jfsops sync` between two real S3 servers on
# loopback with different credentials (SeaweedFS and rclone serve s3) and a
# local directory.
#
#   bash tests/integration/sync_s3.sh            # N=300 small objects
#   SYNC_N=50000 bash tests/integration/sync_s3.sh
#
# Env: JFSOPS_BIN (default build/jfsops), SYNC_N, SYNC_SW_PORT (JO_PORT_BASE+10:
# master, +1 volume, +2 filer, +3 s3), SYNC_RS_PORT (JO_PORT_BASE+4).
# Checks: rclone check finds no difference after a sync; a second run copies
# nothing; --dry-run changes nothing; --delete-dst removes exactly the
# extras; kill -9 mid-run then --resume completes without recopying what
# was finished (multipart included); dir -> s3 and s3 -> dir; a store that
# lists directory by directory is detected and sorted.
. "$(dirname "$0")/lib/init.sh" synccheck
J=${JFSOPS_BIN:-$JO_REPO/build/jfsops}
[ -x "$J" ] || jo_die "$J not built"
N=${SYNC_N:-300}
SWP=${SYNC_SW_PORT:-$((JO_PORT_BASE + 10))}
RSP=${SYNC_RS_PORT:-$((JO_PORT_BASE + 4))}

start_seaweed "$SWP" swak swsk
start_rclone_s3 "$RSP" rcak rcsk
SW=http://127.0.0.1:$((SWP + 3))
RS=http://127.0.0.1:$RSP

sync_rclone_remotes "$SW" "$RS"


rc mkdir SW:src
rc mkdir SW:back
rc mkdir RS:dst

# ---- test data -----------------------------------------------------------
D=$JO_T/data
mkdir -p "$D/small" "$D/odd dir" "$D/big"
for i in $(seq 1 "$N"); do
	printf 'object %d %s\n' "$i" "$RANDOM" >"$D/small/o$(printf %06d "$i")"
done
echo space >"$D/odd dir/with space.txt"
echo uni >"$D/odd dir/ünïcødé-日本.txt"
echo plus >"$D/odd dir/a+b.txt"
echo pct >"$D/odd dir/100%.txt"
echo q >"$D/odd dir/what?.txt"
: >"$D/odd dir/empty1"
: >"$D/small/empty2"
# A 1000-byte key (file names are at most 255 bytes, so 5 segments).
seg=$(printf 'L%.0s' $(seq 1 200))
LONG="long/$seg/$seg/$seg/$seg/$(printf 'E%.0s' $(seq 1 $((1000 - 5 - 4 * 201))))"
mkdir -p "$(dirname "$D/$LONG")"
echo long >"$D/$LONG"
head -c $((7 * 1024 * 1024 + 123)) /dev/urandom >"$D/big/b1.bin"
head -c $((11 * 1024 * 1024)) /dev/urandom >"$D/big/b2.bin"
[ ${#LONG} -eq 1000 ] || jo_die "long key is ${#LONG} bytes"
TOTAL=$(find "$D" -type f | wc -l)
rc copy "$D" SW:src/set

export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
export JFSOPS_DST_ACCESS_KEY=rcak JFSOPS_DST_SECRET_KEY=rcsk
SRC="s3://src/set?endpoint=$SW&path_style=1"
DST="s3://dst/set?endpoint=$RS&path_style=1"
ST=$JO_T/state.db
COMMON=(--multipart-threshold 5M --part-size 5M --transfers 8 -q)
js() { jq -r "$1" "$JO_T/out.json"; }

# ---- 1. first sync, rclone check ------------------------------------------
set +e
"$J" sync "${COMMON[@]}" --json --state "$ST" "$SRC" "$DST" >"$JO_T/out.json" 2>"$JO_T/err.txt"
r=$?
set -e
check_eq "$r" 0 "first sync exit code"
[ "$r" = 0 ] || cat "$JO_T/err.txt"
check_eq "$(js .copied)" "$TOTAL" "first sync copies every object"
check_eq "$(js .failed)" 0 "first sync has no failures"
if rc check SW:src/set RS:dst/set 2>"$JO_T/check.txt"; then ok "rclone check SW -> RS"; else
	bad "rclone check SW -> RS"; cat "$JO_T/check.txt"; fi

# ---- 2. rerun copies nothing ---------------------------------------------
"$J" sync "${COMMON[@]}" --json --state "$ST" "$SRC" "$DST" >"$JO_T/out.json"
check_eq "$(js .copied)" 0 "second run copies nothing"
check_eq "$(js .skipped)" "$TOTAL" "second run skips everything"
# Without the state file the listings alone decide the same.
"$J" sync "${COMMON[@]}" --json --no-state "$SRC" "$DST" >"$JO_T/out.json"
check_eq "$(js .copied)" 0 "stateless rerun copies nothing"
# ListObjects V1 on both sides (per-endpoint setting) sees the same.
"$J" sync "${COMMON[@]}" --json --no-state "$SRC&list_v1=1" "$DST&list_v1=1" >"$JO_T/out.json"
check_eq "$(js .copied)/$(js .listed_src)/$(js .listed_dst)" "0/$TOTAL/$TOTAL" "ListObjects V1 rerun copies nothing"

# ---- 3. a changed source object is copied again ---------------------------
sleep 1.1
echo changed >"$D/small/o000001"
rc copyto "$D/small/o000001" SW:src/set/small/o000001
"$J" sync "${COMMON[@]}" --json --state "$ST" "$SRC" "$DST" >"$JO_T/out.json"
check_eq "$(js .copied)" 1 "changed object is copied"

# ---- 4. --dry-run and --delete-dst -----------------------------------------
echo x | rc rcat RS:dst/set/extra-1
echo x | rc rcat "RS:dst/set/odd dir/extra 2"
rc lsf -R --files-only --format pst RS:dst/set | sort >"$JO_T/before.txt"
"$J" sync "${COMMON[@]}" --json --state "$ST" --delete-dst --dry-run "$SRC" "$DST" >"$JO_T/dry.txt"
tail -n 1 "$JO_T/dry.txt" >"$JO_T/out.json"
check_eq "$(js .would_delete)" 2 "dry run plans two deletions"
check_eq "$(grep -c '"action":"delete"' "$JO_T/dry.txt")" 2 "dry run prints the deletions"
rc lsf -R --files-only --format pst RS:dst/set | sort >"$JO_T/after.txt"
if cmp -s "$JO_T/before.txt" "$JO_T/after.txt"; then ok "dry run changed nothing"; else
	bad "dry run changed the destination"; diff "$JO_T/before.txt" "$JO_T/after.txt" | head; fi
"$J" sync "${COMMON[@]}" --json --state "$ST" --delete-dst --max-delete 1 "$SRC" "$DST" >"$JO_T/out.json" || true
check_eq "$(js .deleted)" 0 "--max-delete 1 refuses two deletions"
check_eq "$(js .delete_refused)" true "refusal is reported"
"$J" sync "${COMMON[@]}" --json --state "$ST" --delete-dst "$SRC" "$DST" >"$JO_T/out.json"
check_eq "$(js .deleted)" 2 "--delete-dst deletes the two extras"
if rc check SW:src/set RS:dst/set 2>"$JO_T/check.txt"; then ok "rclone check after --delete-dst"; else
	bad "rclone check after --delete-dst"; cat "$JO_T/check.txt"; fi
# An empty source never deletes.
rc mkdir SW:emptysrc
"$J" sync -q --json --no-state --delete-dst "s3://src/nothing-here?endpoint=$SW&path_style=1" "$DST" >"$JO_T/out.json" || true
check_eq "$(js .deleted)" 0 "an empty source deletes nothing"

# ---- 5. RS -> SW (other direction, multipart into SeaweedFS) -------------
export JFSOPS_SRC_ACCESS_KEY=rcak JFSOPS_SRC_SECRET_KEY=rcsk
export JFSOPS_DST_ACCESS_KEY=swak JFSOPS_DST_SECRET_KEY=swsk
"$J" sync "${COMMON[@]}" --json --no-state "$DST" "s3://back/set?endpoint=$SW&path_style=1" >"$JO_T/out.json"
check_eq "$(js .failed)" 0 "RS -> SW without failures"
check_eq "$(js .multipart)" 2 "RS -> SW used multipart for the big objects"
if rc check RS:dst/set SW:back/set 2>"$JO_T/check.txt"; then ok "rclone check RS -> SW"; else
	bad "rclone check RS -> SW"; cat "$JO_T/check.txt"; fi

# ---- 6. s3 -> local dir and back --------------------------------------
unset JFSOPS_DST_ACCESS_KEY JFSOPS_DST_SECRET_KEY
export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
"$J" sync "${COMMON[@]}" --json --no-state "s3://back/set?endpoint=$SW&path_style=1" "$JO_T/local" >"$JO_T/out.json"
if diff -r "$D" "$JO_T/local" >/dev/null; then ok "s3 -> local dir is identical"; else bad "s3 -> local dir differs"; fi
export JFSOPS_DST_ACCESS_KEY=swak JFSOPS_DST_SECRET_KEY=swsk
unset JFSOPS_SRC_ACCESS_KEY JFSOPS_SRC_SECRET_KEY
"$J" sync "${COMMON[@]}" --json --no-state "$JO_T/local" "s3://back/set?endpoint=$SW&path_style=1" >"$JO_T/out.json"
check_eq "$(js .copied)" 0 "local dir -> s3 rerun copies nothing"

# ---- 6b. same endpoint and credentials: server-side copy ---------------
export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
rc mkdir SW:sscopy
"$J" sync "${COMMON[@]}" --json --no-state "$SRC" "s3://sscopy/set?endpoint=$SW&path_style=1" >"$JO_T/out.json"
check_eq "$(js .server_side)" "$TOTAL" "same endpoint: every object copied server-side"
if rc check SW:src/set SW:sscopy/set 2>"$JO_T/check.txt"; then ok "rclone check after server-side copy"; else
	bad "rclone check after server-side copy"; cat "$JO_T/check.txt"; fi

# ---- 7. kill -9 mid-run, then --resume ----------------------------------
K=$JO_T/kill
mkdir -p "$K"
for i in $(seq 1 30); do head -c 100000 /dev/urandom >"$K/f$(printf %03d "$i")"; done
head -c $((24 * 1024 * 1024)) /dev/urandom >"$K/zbig.bin"
KST=$JO_T/kill.db
KDST="s3://back/kill?endpoint=$SW&path_style=1"
"$J" sync --multipart-threshold 5M --part-size 5M --transfers 2 --part-concurrency 1 \
	--bwlimit 4M -q --state "$KST" "$K" "$KDST" >/dev/null 2>&1 &
KP=$!
sleep 5
kill -9 $KP
wait $KP 2>/dev/null || true
rc lsf SW:back/kill | sort >"$JO_T/done-before.txt"
nb=$(wc -l <"$JO_T/done-before.txt")
parts=$(sqlite3 "$KST" 'select count(*) from part' 2>/dev/null || echo 0)
echo "     (killed with $nb objects done, $parts multipart parts recorded)"
"$J" sync --multipart-threshold 5M --part-size 5M --transfers 4 -v --resume --json \
	--state "$KST" "$K" "$KDST" >"$JO_T/out.json" 2>"$JO_T/resume.txt"
check_eq "$(js .failed)" 0 "resumed run has no failures"
if [ "$nb" -gt 0 ]; then
	check_eq "$(js .resumed_listing)" true "resumed run listed after the saved position"
	echo "     ($(grep -o 'resuming: listing both sides after "[^"]*"' "$JO_T/resume.txt"))"
fi
grep -o 'copied "[^"]*"' "$JO_T/resume.txt" | sed 's/copied "//; s/"$//' | sort >"$JO_T/copied-after.txt"
again=$(comm -12 "$JO_T/done-before.txt" "$JO_T/copied-after.txt" | wc -l)
check_eq "$again" 0 "no object finished before the kill was copied again"
check_eq "$(( nb + $(wc -l <"$JO_T/copied-after.txt") ))" 31 "finished + resumed = all objects"
if [ "$parts" -gt 0 ]; then
	if grep -q 'resuming upload of "zbig.bin"' "$JO_T/resume.txt"; then ok "multipart upload resumed"; else
		bad "multipart upload was not resumed"; fi
fi
if rc check "$K" SW:back/kill 2>"$JO_T/check.txt"; then ok "rclone check after resume"; else
	bad "rclone check after resume"; cat "$JO_T/check.txt"; fi

# ---- 8. directory-first listing (SeaweedFS) is detected ------------------
O=$JO_T/ord
mkdir -p "$O/a"
echo 1 >"$O/a/x"
echo 2 >"$O/a.txt"
echo 3 >"$O/a-b"
echo 4 >"$O/b"
rc copy "$O" SW:src/ord
export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
export JFSOPS_DST_ACCESS_KEY=rcak JFSOPS_DST_SECRET_KEY=rcsk
echo xyz | rc rcat RS:dst/ord/a/x  # other size: replaced, never deleted
"$J" sync -q --json --state "$JO_T/ord.db" --delete-dst --list-threads 1 \
	"s3://src/ord?endpoint=$SW&path_style=1" "s3://dst/ord?endpoint=$RS&path_style=1" >"$JO_T/out.json" 2>"$JO_T/ord.txt"
echo "     (order restarts: $(js .order_restarts))"
check_eq "$(js .failed)" 0 "directory-first source syncs"
check_eq "$(js .deleted)" 0 "nothing deleted by a mis-ordered merge"
if rc check SW:src/ord RS:dst/ord 2>"$JO_T/check.txt"; then ok "rclone check of the directory-first tree"; else
	bad "rclone check of the directory-first tree"; cat "$JO_T/check.txt"; fi
# Same with several key-range listers (the seam check must catch it too):
# more keys than one listing page, so that the key space is cut into ranges
# (a listing that fits in one page is read by one lister).
cp -r "$O" "$JO_T/ord4"
mkdir -p "$JO_T/ord4/c"
for i in $(seq 1 1100); do : >"$JO_T/ord4/c/f$i"; done
rc copy --transfers 16 "$JO_T/ord4" SW:src/ord4
echo xyzw | rc rcat RS:dst/ord2/a/x
"$J" sync -q --json --no-state --delete-dst --list-threads 4 \
	"s3://src/ord4?endpoint=$SW&path_style=1" "s3://dst/ord2?endpoint=$RS&path_style=1" >"$JO_T/out.json" 2>>"$JO_T/ord.txt"
echo "     (order restarts with 4 listers: $(js .order_restarts))"
check_eq "$(js .deleted)" 0 "4 listers: nothing deleted by a mis-ordered merge"
if rc check SW:src/ord4 RS:dst/ord2 2>"$JO_T/check.txt"; then ok "4 listers: rclone check of the directory-first tree"; else
	bad "4 listers: rclone check of the directory-first tree"; cat "$JO_T/check.txt"; fi
# The explicit per-endpoint setting sorts from the start.
"$J" sync -q --json --no-state "s3://src/ord?endpoint=$SW&path_style=1&unordered=1" \
	"s3://dst/ord?endpoint=$RS&path_style=1" >"$JO_T/out.json"
check_eq "$(js .copied)" 0 "unordered=1 side: nothing to copy"
check_eq "$(js .order_restarts)" 0 "unordered=1 side: no restart"

# ---- 9. exit codes -------------------------------------------------------
set +e
"$J" sync -q "$SRC" 2>/dev/null; check_eq "$?" 2 "usage error exit code"
JFSOPS_SRC_SECRET_KEY=wrong "$J" sync -q --no-state "$SRC" "$JO_T/x" 2>/dev/null; check_eq "$?" 6 "bad credentials exit code"
# a bucket that does not exist (NoSuchBucket) is not an empty listing: exit 8, one line
"$J" sync -q --no-state --delete-dst "s3://nosuchbucket/set?endpoint=$SW&path_style=1" "$JO_T/x" 2>"$JO_T/nb.err"
check_eq "$?" 8 "missing SRC bucket (SeaweedFS) exit code"
check_eq "$(wc -l <"$JO_T/nb.err")" 1 "missing SRC bucket: one line on stderr ($(cat "$JO_T/nb.err"))"
export JFSOPS_SRC_ACCESS_KEY=rcak JFSOPS_SRC_SECRET_KEY=rcsk
"$J" sync -q --no-state "s3://nosuchbucket/set?endpoint=$RS&path_style=1" "$JO_T/x" 2>"$JO_T/nb.err"
check_eq "$?" 8 "missing SRC bucket (rclone serve s3) exit code"
export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
JFSOPS_DST_ACCESS_KEY=rcak JFSOPS_DST_SECRET_KEY=rcsk \
	"$J" sync -q --no-state "$SRC" "s3://nosuchbucket/set?endpoint=$RS&path_style=1" 2>"$JO_T/nb.err"
check_eq "$?" 8 "missing DST bucket exit code ($(cat "$JO_T/nb.err"))"
set -e

if [ "$FAILS" -gt 0 ]; then
	echo "$FAILS check(s) failed"
	exit 1
fi
echo "all sync checks passed"
