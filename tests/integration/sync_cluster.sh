#!/bin/bash
# tests/integration/sync_cluster.sh: `jfsops sync --cluster` with several
# worker processes sharing one job through a coordinator, SeaweedFS (which
# lists directory by directory) -> rclone serve s3, workers SIGKILLed at
# random and restarted.
#
#   bash tests/integration/sync_cluster.sh           # 20,000 objects (issue 16)
#   CLUSTER_N=5000 bash tests/integration/sync_cluster.sh
#
# Corpus size: CLUSTER_N objects, default 20,000 when run by hand. Under
# tests/run_all.sh (it sets JO_BUILD_DIR) the default is CLUSTER_CI_N, 6,000,
# to keep the whole script within ~4 minutes on a loaded 2-core CI machine;
# the awkward objects (unicode, '%', empty, multipart) are in both sizes.
#
# Ports: JO_PORT_BASE+1 redis, +10..+13 SeaweedFS (gRPC +10000), +16 rclone,
# +24 PostgreSQL, +26/+27 etcd.
# Checks:
#  A (Redis): 4 workers, a fifth joining late, one killed every few seconds
#    and replaced: every object of DST has SRC's MD5 (the awkward corpus:
#    unicode, '%', '+', spaces, siblings of directories that sort before '/',
#    empty and multipart objects), the job's copy count equals the objects
#    that needed a copy, --delete-dst removed exactly the extras and only
#    after the last range was done (no extra gone while ranges were still
#    copying; first deletion after the last range's done time), status and
#    per-worker metrics, a finished job says so.
#  B (SQLite coordinator): a second job on the same source, other DST and
#    filters: its own ranges (the first job's stay as they were); every
#    worker killed mid-run, the job restarted by new workers, finished.
#  C (PostgreSQL coordinator): 3 workers, one killed.
#  D (Redis again): a second job on A's coordinator, other DST and filters:
#    a namespace of its own, its own ranges planned and copied (a reuse of
#    A's done ranges would copy nothing), DST equal to the filtered SRC, A's
#    records untouched; --reset runs it again.
#  E (etcd coordinator): the awkward part of the corpus (unicode, '%',
#    empty, multipart), 2 workers, one killed and replaced.
#  F (Redis): one worker with two ranges in flight (--ranges-in-flight 2),
#    SIGKILLed while it holds both leases: the next worker redoes both once
#    they expire; every object copied and counted once.
. "$(dirname "$0")/lib/init.sh" engines synccheck
J=${JFSOPS_BIN:-$JO_REPO/build/jfsops}
[ -x "$J" ] || jo_die "$J not built"
if [ -n "${JO_BUILD_DIR:-}" ]; then N=${CLUSTER_N:-${CLUSTER_CI_N:-6000}}; else N=${CLUSTER_N:-20000}; fi
PY=$JO_VENV/bin/python

start_redis $((JO_PORT_BASE + 1))
start_seaweed $((JO_PORT_BASE + 10)) swak swsk
start_rclone_s3 $((JO_PORT_BASE + 16)) rcak rcsk
SW=$JO_S3_ENDPOINT
RS=$JO_RS3_ENDPOINT
RSROOT=$JO_RS3_ROOT
sync_rclone_remotes "$SW" "$RS"
# start_workers CLUSTER DST "IDS" ARGS...: one `jfsops sync ARGS` worker of
# the job on CLUSTER from $SRC to DST per id, in the background (stderr in
# $JO_T/w-ID.err); their pids in WORKERS.
start_workers() {
	local cl=$1 dst=$2 ids=$3 w
	shift 3
	WORKERS=()
	for w in $ids; do
		"$J" sync "$@" --cluster "$cl" --worker-id $w "$SRC" "$dst" 2>"$JO_T/w-$w.err" &
		WORKERS+=($!)
	done
}
# workers_exit_ok WHAT PIDS...: each of them must exit 0.
workers_exit_ok() {
	local what=$1 p r
	shift
	for p in "$@"; do r=0; wait "$p" || r=$?; check_eq "$r" 0 "$what"; done
}
export JFSOPS_SRC_ACCESS_KEY=swak JFSOPS_SRC_SECRET_KEY=swsk
export JFSOPS_DST_ACCESS_KEY=rcak JFSOPS_DST_SECRET_KEY=rcsk

rc mkdir SW:src
for b in dst dst2 dst3; do rc mkdir "RS:$b"; done

# ---- the corpus -----------------------------------------------------------
D=$JO_T/data
jo_log "making $N objects"
"$PY" - "$D" "$N" <<'EOF'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
r = random.Random(16)
def put(rel, data):
    p = os.path.join(d, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
odd = ["with space.txt", "ünïcødé-日本.txt", "a+b.txt", "100%.txt", "50%25.txt",
       "plus+plus+", "q?mark", "and&amp", "eq=sign", "hash#tag", "日本/語.txt", "日本-2",
       "😀 emoji.txt", "dir/x", "dir/y/z", "dir-x", "dir.x", "dir x", "dir%x", "dir+x",
       "élan/1", "élan-2", "Zebra", "zebra", "~tilde", "!bang", "(paren)", "'quote'",
       "comma,semi;colon", "dollar$", "at@sign", "caret^", "brace{}", "percent%2F-not-a-slash"]
for name in odd:
    put("odd/" + name, ("odd %s\n" % name).encode())
for i in range(20):
    put("empty/e%02d" % i, b"")
# siblings of directories that sort before '/': "small/07" dir next to "small/07-x"
for i in range(0, 100, 7):
    put("small/%02d-x" % i, b"sibling")
    put("small/%02d.y" % i, b"sibling 2")
for i in range(3):
    put("big/b%d.bin" % i, os.urandom(12 * 1024 * 1024 + 777 * i))
left = n - len(odd) - 20 - 2 * len(range(0, 100, 7)) - 3
for i in range(left):
    put("small/%02d/obj-%06d" % (i % 100, i), r.randbytes(r.randrange(1, 2000)))
EOF
TOTAL=$(find "$D" -type f | wc -l)
check_eq "$TOTAL" "$N" "corpus size"
jo_log "uploading to SeaweedFS"
rc copy --transfers 32 --checkers 32 --s3-no-head --no-check-dest --s3-upload-cutoff 64M "$D" SW:src/set

# DST starts with a tenth of the objects already in sync, 50 of them then
# changed in SRC (other size), 30 objects only DST has, and a stale copy.
SRC="s3://src/set?endpoint=$SW&path_style=1"
DST="s3://dst/set?endpoint=$RS&path_style=1"
jo_log "pre-syncing a tenth of the objects"
"$J" sync -q --no-state --include '/small/0*/**' "$SRC" "$DST" || jo_die "pre-sync failed"
PRE=$(find "$RSROOT/dst/set" -type f | wc -l)
i=0
for f in $(cd "$D" && find small/0? -type f -name 'obj-*' | sort | sed -n '1,50p'); do
	printf 'changed %d, a longer body than before: %s\n' "$i" "$f" >"$D/$f"
	i=$((i + 1))
done
(cd "$D" && find small/0? -type f -name 'obj-*' | sort | sed -n '1,50p') >"$JO_T/changed.txt"
rc copy --transfers 16 --s3-no-head --no-check-dest --files-from "$JO_T/changed.txt" "$D" SW:src/set
# (through S3: rclone serve s3 does not see files put behind its back for minutes)
for i in $(seq 1 30); do echo "extra $i" | rc rcat "RS:dst/set/extra/d$((i % 3))/x$i"; done
echo stale | rc rcat "RS:dst/set/odd/dir-x"
NEEDED=$((TOTAL - PRE + 50))
echo "     ($TOTAL objects, $PRE already in DST, $NEEDED need a copy, 30 extras)"

# md5 of every object, SRC's from the local tree it was uploaded from
# (checked against SeaweedFS's listing: single-part ETags are MD5s)
# (rclone serve s3 keeps a multipart upload in progress as a hidden file
# .rclone_temp_multipart_*, which no listing shows: not an object)
tree_md5() { (cd "$1" && find . -type f ! -name '.rclone_temp_multipart_*' -print0 | sort -z | xargs -0 md5sum); }
tree_md5 "$D" >"$JO_T/src.md5"
"$PY" "$JO_REPO/tests/tools/s3util.py" list "$SW" swak swsk src set/ >"$JO_T/sw.list"
"$PY" - "$JO_T/src.md5" "$JO_T/sw.list" <<'EOF' || jo_die "SeaweedFS does not hold the corpus"
import sys
md5 = {}
for line in open(sys.argv[1], encoding="utf-8", errors="surrogateescape"):
    h, p = line.rstrip("\n").split("  ", 1)
    md5[p[2:]] = h
seen = 0
for line in open(sys.argv[2], encoding="utf-8", errors="surrogateescape"):
    k, size, etag = line.rstrip("\n").rsplit(" ", 2)
    k = k[len("set/"):]
    assert k in md5, "SeaweedFS has %r, not in the corpus" % k
    if "-" not in etag:
        assert etag.strip('"') == md5[k], "%r: ETag %s, MD5 %s" % (k, etag, md5[k])
    seen += 1
assert seen == len(md5), "SeaweedFS lists %d objects, the corpus has %d" % (seen, len(md5))
EOF

# ---- A: Redis, 4 workers + 1 late, kills ------------------------------------
CO="redis://127.0.0.1:$JO_REDIS_PORT/5"
JOB=(--id migration-a --delete-dst --max-delete 100 --lease 3s --checkpoint 1s --transfers 8
	--multipart-threshold 8M --part-size 5M -q)
declare -A WPID=()
start_worker() { # NAME
	"$J" sync "${JOB[@]}" --cluster "$CO" --worker-id "$1" --json \
		--metrics-file "$JO_T/m-$1.prom" "$SRC" "$DST" >"$JO_T/w-$1.json" 2>"$JO_T/w-$1.err" &
	WPID[$1]=$!
}
status_json() { "$J" sync --cluster "$1" --status --id "$2" --json; }
jo_log "job A: 4 workers"
t0=$SECONDS
for w in a1 a2 a3 a4; do start_worker $w; done
# the sampler: while any range is still copying, every extra must still exist
(
	while sleep 0.4; do
		s=$(status_json "$CO" migration-a 2>/dev/null) || continue
		state=$(echo "$s" | jq -r .state)
		[ "$state" = finished ] && break
		present=$(find "$RSROOT/dst/set/extra" -type f 2>/dev/null | wc -l)
		echo "$state $(echo "$s" | jq -r '.ranges.done') $(echo "$s" | jq -r '.ranges.planned') $present"
	done
) >"$JO_T/samples.txt" &
SAMPLER=$!
# a fifth worker joins as soon as the ranges are planned; a random worker is SIGKILLed and replaced at
# 1.5 s and at 2.5 s, then each half second with probability 1/5 (at most 6
# kills): a short job still sees two kills (with chance alone, a 9 s job had
# fewer than two about one run in four)
kills=0 late=0 next=a5 late_at=
for tick in $(seq 1 600); do
	sleep 0.5
	alive=()
	for w in "${!WPID[@]}"; do kill -0 "${WPID[$w]}" 2>/dev/null && alive+=("$w"); done
	[ ${#alive[@]} -gt 0 ] || break
	# it joins at the first look that finds the ranges planned: joining at a
	# fixed 3 s, it once found the last 7 ranges all leased by the others (a
	# fast machine had done 9 of 16 by then) and never got one
	if [ $late = 0 ]; then
		late_at=$(status_json "$CO" migration-a 2>/dev/null |
			jq -r '"\(.state) \(.ranges.done)/\(.ranges.planned) (\(.ranges.pending) unclaimed)"') ||
			late_at=
		case $late_at in
		planning* | "") ;; # not planned yet: join once it is
		*) start_worker a-late; late=1 ;;
		esac
	fi
	if [ $kills -lt 6 ] && [ "$tick" -ge 3 ] &&
		{ [ "$tick" -ge $((3 + 2 * kills)) ] && [ $kills -lt 2 ] || [ $((RANDOM % 5)) = 0 ]; }; then
		# (the late worker is spared: it must show that a late join takes ranges)
		cand=()
		for w in "${alive[@]}"; do [ "$w" = a-late ] || cand+=("$w"); done
		[ ${#cand[@]} -gt 0 ] || continue
		victim=${cand[$((RANDOM % ${#cand[@]}))]}
		kill -KILL "${WPID[$victim]}" 2>/dev/null || true
		wait "${WPID[$victim]}" 2>/dev/null || true
		unset "WPID[$victim]"
		kills=$((kills + 1))
		echo "     (t=$((SECONDS - t0))s: killed $victim, starting $next)"
		start_worker $next
		next=a$((kills + 5))
	fi
done
for w in "${!WPID[@]}"; do
	r=0
	wait "${WPID[$w]}" || r=$?
	check_eq "$r" 0 "worker $w exit code"
	[ "$r" = 0 ] || tail -n 5 "$JO_T/w-$w.err"
done
wait $SAMPLER 2>/dev/null || true
echo "     (job A took $((SECONDS - t0)) s with $kills kills; the late worker joined at $late_at ranges done)"
[ "$kills" -ge 2 ] && ok "job A: $kills workers SIGKILLed mid-job" || bad "job A: only $kills kills (the job ended too soon)"
case $late_at in copying*) ok "job A: the fifth worker joined while the job was copying ($late_at)" ;;
*) bad "job A: the fifth worker joined at '$late_at', not while copying" ;; esac
status_json "$CO" migration-a >"$JO_T/a.json"
js() { jq -r "$1" "$JO_T/a.json"; }
check_eq "$(js .state)/$(js .status)" "finished/ok" "job A finished"
check_eq "$(js .ranges.failed)" 0 "job A: no range failed"
check_eq "$(js '.ranges.done == .ranges.planned')" true "job A: every range done"
check_eq "$(js .copied)" "$NEEDED" "job A: copies counted = objects that needed a copy"
check_eq "$(js .deleted)" 30 "job A: the 30 extras deleted"
echo "     ($(js .ranges.planned) ranges, $(js .credited) copies of killed workers counted by the next attempt)"
[ "$(js .first_delete_at)" -ge "$(js .last_range_done_at)" ] &&
	ok "job A: first deletion after the last range was done" ||
	bad "job A: a deletion at $(js .first_delete_at) before the last range at $(js .last_range_done_at)"
early=$(awk '$1 != "deleting" && $1 != "finished" && $4 < 30' "$JO_T/samples.txt" | wc -l)
check_eq "$early" 0 "job A: no extra deleted while ranges were copying ($(wc -l <"$JO_T/samples.txt") samples)"
tree_md5 "$RSROOT/dst/set" >"$JO_T/dst.md5"
left=$(find "$RSROOT/dst" -name '.rclone_temp_multipart_*' | wc -l)
echo "     ($left multipart uploads left in progress on DST: a killed worker's are aborted by the next attempt)"
if cmp -s "$JO_T/src.md5" "$JO_T/dst.md5"; then ok "job A: MD5 of every DST object equals SRC's"; else
	bad "job A: DST differs from SRC"; diff "$JO_T/src.md5" "$JO_T/dst.md5" | head -n 10 || true; fi
# what the operator sees
"$J" sync --cluster "$CO" --status --id migration-a >"$JO_T/a.txt"
grep -q "ranges: *$(js .ranges.planned) planned, $(js .ranges.planned) done" "$JO_T/a.txt" &&
	ok "status text shows every range done" || { bad "status text"; cat "$JO_T/a.txt"; }
nw=$(jq '.workers | length' "$JO_T/a.json")
# a replacement started as the job finished finds it done and never works:
# its summary says was_finished, and it is not a worker of the job
after=$(cat "$JO_T"/w-a*.json | jq -s '[.[] | select(.type == "summary" and .was_finished)] | length')
[ "$nw" -ge $((5 + kills - after)) ] && ok "status lists every worker ($nw; $after started after the end)" ||
	bad "status lists $nw workers, $((5 + kills - after)) worked ($after more started after the end)"
ngone=$(jq '[.workers[] | select(.state == "gone")] | length' "$JO_T/a.json")
nother=$(jq '[.workers[] | select(.state != "gone" and .state != "done")] | length' "$JO_T/a.json")
[ "$nother" = 0 ] && [ "$ngone" -ge 1 ] && [ "$ngone" -le "$kills" ] &&
	ok "status: the killed workers are 'gone' ($ngone), the others 'done'" ||
	bad "status: $ngone workers 'gone' ($kills killed), $nother neither gone nor done"
lr=$(jq '[.workers[] | select(.worker == "a-late") | .ranges][0] // 0' "$JO_T/a.json")
[ "$lr" -ge 1 ] && ok "job A: the late worker did $lr range(s)" || bad "job A: the late worker did no range"
grep -q "state: *finished ok" "$JO_T/a.txt" && ok "status text of the finished job says 'finished ok'" ||
	bad "status text of the finished job: $(grep state: "$JO_T/a.txt")"
grep -q "deletes: *running after the last range" "$JO_T/a.txt" && ok "status text shows the delete phase" ||
	bad "status text: no delete phase"
echo "     --- status of the finished job A:"; sed 's/^/     | /' "$JO_T/a.txt" | head -n 30
jq -e '[.workers[] | select(.copied > 0) | .bytes_per_s > 0] | all' "$JO_T/a.json" >/dev/null &&
	ok "status gives each worker's throughput" || bad "status throughput per worker"
for w in a1 a-late; do
	f=$JO_T/m-$w.prom
	[ -s "$f" ] || continue
	grep -q "^jfsops_sync_last_run_copied_objects{job=\"[^\"]*\",worker=\"$w\"" "$f" &&
		ok "metrics of $w carry its worker label" || bad "metrics of $w: no worker label"
	"$PY" "$JO_REPO/tests/tools/promcheck.py" sync "$f" || bad "metrics of $w are not valid"
done
# a finished job says so, and copies nothing
r=0
"$J" sync "${JOB[@]}" --cluster "$CO" --json "$SRC" "$DST" >"$JO_T/again.json" 2>"$JO_T/again.err" || r=$?
check_eq "$r" 0 "finished job: exit code of a rerun"
grep -q "is finished" "$JO_T/again.err" && ok "finished job: the rerun says so" || bad "rerun: $(cat "$JO_T/again.err")"
check_eq "$(jq -r .was_finished "$JO_T/again.json")" true "finished job: nothing done again"
# the same --id for another sync is refused
r=0
"$J" sync --id migration-a --cluster "$CO" -q "$SRC" "s3://dst2/x?endpoint=$RS&path_style=1" 2>/dev/null || r=$?
check_eq "$r" 2 "--id of another job: usage error"

# ---- B: SQLite coordinator, another job, every worker killed ------------------
CB="sqlite3://$JO_T/coord-b.db"
DST2="s3://dst2/set?endpoint=$RS&path_style=1"
JOBB=(--include '/small/1*/**' --include '/odd/**' --include '/big/**' --lease 2s --checkpoint 500ms
	--transfers 4 --multipart-threshold 8M --part-size 5M -q)
(cd "$D" && find small/1? odd big -type f | wc -l) >"$JO_T/b.count"
NB=$(cat "$JO_T/b.count")
jo_log "job B: $NB objects, 3 workers, all killed"
start_workers "$CB" "$DST2" "b1 b2 b3" "${JOBB[@]}"
pb=("${WORKERS[@]}")
for i in $(seq 1 100); do
	sleep 0.2
	d=$(find "$RSROOT/dst2" -type f 2>/dev/null | wc -l)
	[ "$d" -ge $((NB / 4)) ] && break
done
kill -KILL "${pb[@]}" 2>/dev/null || true
for p in "${pb[@]}"; do wait "$p" 2>/dev/null || true; done
"$J" sync "${JOBB[@]}" --cluster "$CB" --status --json "$SRC" "$DST2" >"$JO_T/b0.json"
echo "     (all killed: $(jq -r .state "$JO_T/b0.json"), $(jq -r .ranges.done "$JO_T/b0.json")/$(jq -r .ranges.planned "$JO_T/b0.json") ranges done)"
check_eq "$(jq -r .state "$JO_T/b0.json")" copying "job B: not finished after every worker died"
start_workers "$CB" "$DST2" "b4 b5" "${JOBB[@]}"
pb=("${WORKERS[@]}")
workers_exit_ok "job B: restarted worker exit code" "${pb[@]}"
"$J" sync "${JOBB[@]}" --cluster "$CB" --status --json "$SRC" "$DST2" >"$JO_T/b.json"
check_eq "$(jq -r '"\(.state)/\(.status)"' "$JO_T/b.json")" "finished/ok" "job B finished"
check_eq "$(jq -r .copied "$JO_T/b.json")" "$NB" "job B: its own ranges, every object copied once"
(cd "$D" && find ./small/1? ./odd ./big -type f -print0 | sort -z | xargs -0 md5sum) >"$JO_T/b-src.md5"
tree_md5 "$RSROOT/dst2/set" >"$JO_T/b-dst.md5"
if cmp -s "$JO_T/b-src.md5" "$JO_T/b-dst.md5"; then ok "job B: DST2 equals the filtered SRC"; else
	bad "job B: DST2 differs"; diff "$JO_T/b-src.md5" "$JO_T/b-dst.md5" | head -n 5 || true; fi
# job A is untouched by B (B ran on its own coordinator; A's records on Redis
# are checked again after C, which shares A's coordinator)

# ---- C: PostgreSQL coordinator ------------------------------------------------
engine_start postgres
pg_sql postgres "CREATE DATABASE coord" >/dev/null || jo_die "cannot create the coordinator database"
CC="postgres://postgres@127.0.0.1:$JO_PG_PORT/coord?sslmode=disable"
export META_PASSWORD=$JO_PG_PASS
DST3="s3://dst3/set?endpoint=$RS&path_style=1"
JOBC=(--include '/small/2*/**' --lease 2s --checkpoint 500ms --transfers 4 -q)
NC=$(cd "$D" && find small/2? -type f | wc -l)
jo_log "job C: $NC objects on PostgreSQL, --plan on one process, 3 --worker, one killed"
# workers that come before the plan wait for it
start_workers "$CC" "$DST3" "c1 c2 c3" "${JOBC[@]}" --worker
pc=("${WORKERS[@]}")
sleep 1
r=0
"$J" sync "${JOBC[@]}" --plan --cluster "$CC" --worker-id c0 "$SRC" "$DST3" 2>"$JO_T/w-c0.err" || r=$?
check_eq "$r" 0 "job C: --plan exit code"
grep -q "planned, [0-9]* ranges" "$JO_T/w-c0.err" && ok "job C: --plan says what it planned" ||
	bad "job C: --plan: $(cat "$JO_T/w-c0.err")"
sleep 3
kill -KILL "${pc[0]}" 2>/dev/null || true
wait "${pc[0]}" 2>/dev/null || true
for p in "${pc[1]}" "${pc[2]}"; do r=0; wait "$p" || r=$?; check_eq "$r" 0 "job C: worker exit code"; done
"$J" sync "${JOBC[@]}" --cluster "$CC" --status --json "$SRC" "$DST3" >"$JO_T/c.json"
check_eq "$(jq -r '"\(.state)/\(.status)"' "$JO_T/c.json")" "finished/ok" "job C finished on PostgreSQL"
check_eq "$(jq -r .copied "$JO_T/c.json")" "$NC" "job C: every object copied once"
(cd "$D" && find ./small/2? -type f -print0 | sort -z | xargs -0 md5sum) >"$JO_T/c-src.md5"
tree_md5 "$RSROOT/dst3/set" >"$JO_T/c-dst.md5"
cmp -s "$JO_T/c-src.md5" "$JO_T/c-dst.md5" && ok "job C: DST3 equals the filtered SRC" || bad "job C: DST3 differs"
unset META_PASSWORD

# ---- two jobs on one coordinator ----------------------------------------------
DST4="s3://dst3/other?endpoint=$RS&path_style=1"
JOBD=(--include '/odd/**' --include '/empty/**' --include '/small/5*/**' --lease 3s --transfers 4 -q)
ND=$(cd "$D" && find odd empty small/5? -type f | wc -l)
start_workers "$CO" "$DST4" "d1 d2" "${JOBD[@]}"
pd=("${WORKERS[@]}")
workers_exit_ok "job D: worker exit code" "${pd[@]}"
"$J" sync --cluster "$CO" --status --json >"$JO_T/all.json"
check_eq "$(jq -s 'length' "$JO_T/all.json")" 2 "the Redis coordinator holds two jobs"
nsa=$(jq -rs '[.[] | select(.name == "migration-a")][0].ns' "$JO_T/all.json")
nsd=$(jq -rs '[.[] | select(.name == null)][0].ns' "$JO_T/all.json")
[ -n "$nsd" ] && [ "$nsd" != null ] && [ "$nsd" != "$nsa" ] && ok "job D has a namespace of its own ($nsd, A: $nsa)" ||
	bad "job D's namespace '$nsd' (A: '$nsa')"
check_eq "$(jq -s '[.[] | select(.name == "migration-a")][0].copied' "$JO_T/all.json")" "$NEEDED" \
	"job A's records are untouched by the next job"
check_eq "$(jq -s "[.[] | select(.name == \"migration-a\")][0].ranges.planned == $(js .ranges.planned)" "$JO_T/all.json")" \
	true "job A's ranges are as they were"
check_eq "$(jq -rs '[.[] | select(.name == null)][0] | "\(.state)/\(.status)/\(.ranges.done == .ranges.planned)"' "$JO_T/all.json")" \
	"finished/ok/true" "job D planned and finished its own ranges"
check_eq "$(jq -s '[.[] | select(.name == null)][0].copied' "$JO_T/all.json")" "$ND" "job D copied each of its own objects"
(cd "$D" && find ./odd ./empty ./small/5? -type f -print0 | sort -z | xargs -0 md5sum) >"$JO_T/d-src.md5"
tree_md5 "$RSROOT/dst3/other" >"$JO_T/d-dst.md5"
if cmp -s "$JO_T/d-src.md5" "$JO_T/d-dst.md5"; then ok "job D: its DST equals the filtered SRC, object by object"; else
	bad "job D: its DST differs"; diff "$JO_T/d-src.md5" "$JO_T/d-dst.md5" | head -n 5 || true; fi
# --reset starts a job over: planned and worked again (nothing left to copy)
r=0
"$J" sync "${JOBD[@]}" --cluster "$CO" --reset --json "$SRC" "$DST4" >"$JO_T/d.json" 2>"$JO_T/d.err" || r=$?
check_eq "$r/$(jq -r '"\(.was_finished)/\(.status)/\(.copied)"' "$JO_T/d.json")" "0/false/ok/0" \
	"--reset: the job runs again from the start"

# ---- E: etcd coordinator, the awkward objects ----------------------------------
start_etcd $((JO_PORT_BASE + 26))
CE="etcd://127.0.0.1:$JO_ETCD_PORT/coord"
DST5="s3://dst3/etcd?endpoint=$RS&path_style=1"
JOBE=(--include '/odd/**' --include '/empty/**' --include '/big/**' --include '/small/3*/**' --lease 2s
	--checkpoint 500ms --transfers 4 --multipart-threshold 8M --part-size 5M -q)
NE=$(cd "$D" && find odd empty big small/3? -type f | wc -l)
jo_log "job E: $NE objects on etcd, 2 workers, one killed and replaced"
start_workers "$CE" "$DST5" "e1 e2" "${JOBE[@]}"
pe=("${WORKERS[@]}")
sleep 1.5
kill -KILL "${pe[0]}" 2>/dev/null || true
wait "${pe[0]}" 2>/dev/null || true
"$J" sync "${JOBE[@]}" --cluster "$CE" --worker-id e3 "$SRC" "$DST5" 2>"$JO_T/w-e3.err" &
pe[0]=$!
workers_exit_ok "job E: worker exit code" "${pe[@]}"
"$J" sync "${JOBE[@]}" --cluster "$CE" --status --json "$SRC" "$DST5" >"$JO_T/e.json"
check_eq "$(jq -r '"\(.state)/\(.status)"' "$JO_T/e.json")" "finished/ok" "job E finished on etcd"
check_eq "$(jq -r .copied "$JO_T/e.json")" "$NE" "job E: every object copied once"
(cd "$D" && find ./odd ./empty ./big ./small/3? -type f -print0 | sort -z | xargs -0 md5sum) >"$JO_T/e-src.md5"
tree_md5 "$RSROOT/dst3/etcd" >"$JO_T/e-dst.md5"
if cmp -s "$JO_T/e-src.md5" "$JO_T/e-dst.md5"; then ok "job E: DST equals the filtered SRC, object by object"; else
	bad "job E: DST differs"; diff "$JO_T/e-src.md5" "$JO_T/e-dst.md5" | head -n 5 || true; fi

# ---- F: a worker SIGKILLed while it holds two ranges at once ---------------------
# (--ranges-in-flight: each range on a lease of its own, all on one pool of
# transfers; the dead worker's ranges both go to the next worker)
DST6="s3://dst3/inflight?endpoint=$RS&path_style=1"
JOBF=(--id inflight-f --include '/small/1*/**' --ranges 12 --ranges-in-flight 2 --lease 2s
	--checkpoint 300ms --transfers 2 --bwlimit 100K -q)
NF=$(cd "$D" && find small/1? -type f | wc -l)
jo_log "job F: $NF objects, one worker with two ranges in flight, killed"
start_workers "$CO" "$DST6" "f1" "${JOBF[@]}"
pf=${WORKERS[0]}
held=0
for _ in $(seq 1 100); do
	held=$(status_json "$CO" inflight-f 2>/dev/null |
		jq '[.leases[] | select(.owner == "f1" and .kind == "range")] | length' 2>/dev/null) || held=0
	[ "${held:-0}" -ge 2 ] && break
	sleep 0.1
done
kill -KILL "$pf" 2>/dev/null || true
wait "$pf" 2>/dev/null || true
check_eq "$held" 2 "job F: the worker held two range leases at once when killed"
status_json "$CO" inflight-f >"$JO_T/f-killed.json"
fdone=$(jq '.ranges.done' "$JO_T/f-killed.json")
[ "$fdone" -lt 12 ] && ok "job F: killed with ranges left ($fdone of 12 done)" ||
	bad "job F: the job was done before the kill ($fdone of 12)"
r=0
"$J" sync "${JOBF[@]}" --cluster "$CO" --worker-id f2 --ranges-in-flight 3 "$SRC" "$DST6" \
	2>"$JO_T/w-f2.err" || r=$?
check_eq "$r" 0 "job F: the next worker's exit code"
status_json "$CO" inflight-f >"$JO_T/f.json"
check_eq "$(jq -r '"\(.state)/\(.status)/\(.ranges.done)"' "$JO_T/f.json")" "finished/ok/12" \
	"job F finished, every range done"
check_eq "$(jq -r .copied "$JO_T/f.json")" "$NF" "job F: every object counted once (the killed ranges' copies too)"
(cd "$D" && find ./small/1? -type f -print0 | sort -z | xargs -0 md5sum) >"$JO_T/f-src.md5"
tree_md5 "$RSROOT/dst3/inflight" >"$JO_T/f-dst.md5"
if cmp -s "$JO_T/f-src.md5" "$JO_T/f-dst.md5"; then ok "job F: DST equals the filtered SRC, object by object"; else
	bad "job F: DST differs"; diff "$JO_T/f-src.md5" "$JO_T/f-dst.md5" | head -n 5 || true; fi

if [ "$FAILS" -gt 0 ]; then
	echo "$FAILS check(s) failed"
	exit 1
fi
echo "all sync cluster checks passed"
