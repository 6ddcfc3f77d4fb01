#!/usr/bin/env bash
# tests/integration/sync_overlap.sh: `jfsops sync` refuses SRC and DST that
# overlap (the same tree, or one inside the other), as rclone does, before
# anything is listed, created or written; with and without --cluster.
#
# Ports: JO_PORT_BASE+1 Redis (the cluster coordinator), +10..+13 SeaweedFS.
# Checks, each: exit 2, one clear line on stderr naming both places,
# nothing on stdout, and both trees byte for byte as before (local: the
# directory tree with modes and contents; s3: the bucket's keys, sizes and
# ETags), no state file, no coordinator record:
#  - local: the issue's two repros (`sync d/a d --delete-dst` deleted the
#    source; `sync d d/copy` built d/copy/copy/copy/y), the same tree spelled
#    with trailing slashes, "." and "..", SRC given through a symlinked
#    parent, a DST that does not exist yet under SRC (never created), a DST
#    reached through a symlink into SRC, filters (which do not make it safe);
#  - s3 on SeaweedFS: s3://b/p vs s3://b/p/q (both directions), s3://b/p vs
#    s3://b/p, the bucket root vs a prefix, with --delete-dst;
#  - the same with --cluster (a Redis coordinator: its database stays empty);
#  - neighbours are not refused: d/a vs d/ab, s3://b/p vs s3://b/pq, and
#    another bucket, sync normally.
. "$(dirname "$0")/lib/init.sh"
J=${JFSOPS_BIN:-$JO_REPO/build/jfsops}
[ -x "$J" ] || jo_die "jfsops binary $J not found (set JFSOPS_BIN or build first)"
PY=$JO_VENV/bin/python

start_redis $((JO_PORT_BASE + 1))
start_seaweed $((JO_PORT_BASE + 10)) swak swsk
SW=$JO_S3_ENDPOINT
CL=redis://127.0.0.1:$JO_REDIS_PORT/3
export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
export JFSOPS_DST_ACCESS_KEY=swak JFSOPS_DST_SECRET_KEY=swsk
export XDG_CACHE_HOME=$JO_T/cache   # a default state file would appear here
NCHECK=0

# the whole tree under $1: names, types, modes, link targets, contents
tree_digest() {
	(cd "$1" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) | sha256sum
}
bucket_digest() { "$PY" "$JO_REPO/tests/tools/s3util.py" digest "$SW" swak swsk "$1"; }
coord_keys() { redis-cli -p "$JO_REDIS_PORT" -n 3 dbsize; }

# refused WHAT DIGEST-CMD -- jfsops sync args...: exit 2, one line, nothing changed
refused() {
	local what=$1 digest=$2 before after rc=0 ckeys
	shift 3
	before=$($digest)
	ckeys=$(coord_keys)
	"$J" sync "$@" >"$JO_T/out" 2>"$JO_T/err" || rc=$?
	[ "$rc" = 2 ] || jo_die "$what: exit $rc, want 2 (usage): $(cat "$JO_T/err")"
	[ "$(wc -l <"$JO_T/err")" = 1 ] || jo_die "$what: want one line on stderr, got: $(cat "$JO_T/err")"
	grep -q 'SRC and DST overlap' "$JO_T/err" || jo_die "$what: the line does not say why: $(cat "$JO_T/err")"
	[ ! -s "$JO_T/out" ] || jo_die "$what: something on stdout: $(cat "$JO_T/out")"
	after=$($digest)
	[ "$before" = "$after" ] || jo_die "$what: the trees changed although the run was refused"
	[ -z "$(ls -A "$XDG_CACHE_HOME" 2>/dev/null)" ] || jo_die "$what: a state file was created: $(ls -R "$XDG_CACHE_HOME")"
	[ "$(coord_keys)" = "$ckeys" ] || jo_die "$what: the coordinator got records"
	NCHECK=$((NCHECK + 1))
	echo "ok   - refused: $what ($(cat "$JO_T/err"))"
}

# ---- local trees ----------------------------------------------------------
W=$JO_T/w
mkdir -p "$W/d/a/sub" "$W/other"
echo x >"$W/d/a/x"
echo y >"$W/d/y"
echo s >"$W/d/a/sub/s"
chmod 640 "$W/d/y"
ln -s "$W/d" "$W/other/dlink"         # a symlinked parent of SRC
ln -s "$W/d/a" "$W/other/alink"       # a link into SRC, as DST
cd "$W"
local_digest() { tree_digest "$W"; }

for cl in "" "--cluster $CL"; do
	# shellcheck disable=SC2086
	set -- $cl
	tag=${cl:+ (--cluster)}
	refused "sync d/a d --delete-dst$tag" local_digest -- --no-state "$@" --delete-dst d/a d
	refused "sync d d/copy$tag" local_digest -- "$@" d d/copy
	refused "sync d/ d/a/..//$tag (the same tree)" local_digest -- --no-state "$@" d/ d/a/..//
	refused "sync ./d/./a d/$tag" local_digest -- --no-state "$@" ./d/./a d/
	refused "sync other/dlink/a d$tag (SRC through a symlinked parent)" local_digest -- --no-state "$@" other/dlink/a d
	refused "sync d other/dlink/new$tag (DST through a symlinked parent, not there yet)" local_digest -- \
		--no-state "$@" d other/dlink/new
	refused "sync d d/new/deeper$tag (DST under SRC, not there yet)" local_digest -- --no-state "$@" d d/new/deeper
	refused "sync d other/alink$tag (DST a link into SRC)" local_digest -- --no-state "$@" d other/alink
	refused "sync d other/../d/a/../$tag" local_digest -- --no-state "$@" --delete-dst d other/../d/a/../
	refused "sync \$PWD/d file://\$PWD/d/a$tag (absolute, file://)" local_digest -- --no-state "$@" "$W/d" "file://$W/d/a"
	refused "sync d/a d --exclude 'a/**'$tag (filters do not make it safe)" local_digest -- \
		--no-state "$@" --delete-dst --exclude 'a/**' d/a d
done
refused "sync d d/copy --dry-run" local_digest -- --no-state --dry-run d d/copy
[ ! -e d/copy ] && [ ! -e d/new ] && [ ! -e other/dlink/new ] || jo_die "a refused run created its DST"

# neighbours: d/a and d/ab are not one inside the other
rc=0
"$J" sync -q --no-state d/a d/ab 2>"$JO_T/err" || rc=$?
[ $rc = 0 ] && [ "$(cat d/ab/x)" = x ] || jo_die "sync d/a d/ab (neighbours): exit $rc: $(cat "$JO_T/err")"
echo "ok   - neighbours d/a and d/ab sync"
cd /

# ---- s3 (SeaweedFS) -----------------------------------------------------------
s3_mkbucket ovl
s3_mkbucket ovl2
for k in p/one p/q/two p/q/three pq/four top; do
	echo "$k" >"$JO_T/obj"
	"$PY" "$JO_REPO/tests/tools/s3util.py" put "$SW" swak swsk ovl "$k" "$JO_T/obj"
done
s3_digest() { echo "$(bucket_digest ovl) $(bucket_digest ovl2)"; }
E="endpoint=$SW&path_style=1"
for cl in "" "--cluster $CL"; do
	# shellcheck disable=SC2086
	set -- $cl
	tag=${cl:+ (--cluster)}
	refused "s3://ovl/p -> s3://ovl/p/q$tag" s3_digest -- --no-state "$@" "s3://ovl/p?$E" "s3://ovl/p/q?$E"
	refused "s3://ovl/p/q -> s3://ovl/p --delete-dst$tag" s3_digest -- --no-state "$@" --delete-dst \
		"s3://ovl/p/q?$E" "s3://ovl/p?$E"
	refused "s3://ovl/p -> s3://ovl/p/$tag (the same prefix)" s3_digest -- --no-state "$@" "s3://ovl/p?$E" "s3://ovl/p/?$E"
	refused "s3://ovl -> s3://ovl/p$tag (the bucket holds the prefix)" s3_digest -- --no-state "$@" \
		"s3://ovl?$E" "s3://ovl/p?$E"
	refused "s3://ovl/p -> s3://ovl/p/q, the endpoint with a trailing '/'$tag" s3_digest -- --no-state "$@" \
		"s3://ovl/p?$E" "s3://ovl/p/q?endpoint=$SW/&path_style=1"
done
# neighbours and another bucket sync normally
rc=0
"$J" sync -q --no-state "s3://ovl/p?$E" "s3://ovl/pq?$E" 2>"$JO_T/err" || rc=$?
[ $rc = 0 ] || jo_die "s3://ovl/p -> s3://ovl/pq (neighbours): exit $rc: $(cat "$JO_T/err")"
"$PY" "$JO_REPO/tests/tools/s3util.py" list "$SW" swak swsk ovl pq/ | grep -q '^pq/q/two ' ||
	jo_die "s3://ovl/p -> s3://ovl/pq did not copy"
echo "ok   - neighbours s3://ovl/p and s3://ovl/pq sync"
rc=0
"$J" sync -q --no-state "s3://ovl/p?$E" "s3://ovl2/p?$E" 2>"$JO_T/err" || rc=$?
[ $rc = 0 ] || jo_die "s3://ovl/p -> s3://ovl2/p (another bucket): exit $rc: $(cat "$JO_T/err")"
echo "ok   - another bucket syncs"

echo "$(basename "$0"): $NCHECK refusals checked, ok"
