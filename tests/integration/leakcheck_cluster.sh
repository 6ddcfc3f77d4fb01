#!/usr/bin/env bash
# tests/integration/leakcheck_cluster.sh: `jfsops leakcheck --cluster` (issue
# 32): one leak check shared by worker processes through a coordinator.
#
# Volumes (Redis metadata, SeaweedFS objects, 64K blocks, files written in
# several juicefs sessions so that their slice ids fill several leaves; the
# hash-prefix one with its counter set past 10^6 first), one
# per layout of LKC_LAYOUTS (default: plain, hash-prefix, sharded over 3
# buckets), each with planted leaks (an unreferenced slice, a block past the
# end of a live slice), a removed live block, a recent plant, foreign keys
# at every level of chunks/ and an old object of a slice id past the
# counter. For every coordinator engine of JO_ENGINES (default: redis
# postgres etcd) and every layout:
#   - a job of 6 planned ranges, worked by 3 workers seeing the store
#     through tests/tools/s3shim.py with every LIST delayed: the first one is
#     SIGKILLed while it holds a range and started again, the third joins
#     late; the job's report (written by a worker given --out, and by the
#     command without --plan/--worker, which lists nothing) has exactly the
#     lines of the one-host report of the same volume (sorted: the one-host
#     run writes foreign lines in listing order), and the same counters;
#     --status says every range is done, none failed. Every other job keeps
#     its files in a bucket (--work s3://lkcwork/E-L on SeaweedFS, keys from
#     JFSOPS_WORK_*), the others in a directory: the same report either way,
#     the runs and range reports under the prefix, no staging file left.
# Two more volumes, plain layout, metadata on PostgreSQL and etcd
# (LKC_PART_ENGINES), each a job of 4 chunk parts and the extras under a Redis coordinator:
# the report equals the one-host report (a stray run in the job's directory
# is never read), every chunk part holds chunks
# (etcd: by the inodes' low bytes), and on PostgreSQL (jfs_chunk held locked) a
# worker seen inside two scan parts at once (its two tasks in flight), then
# SIGKILLed inside them, its parts redone by others after
# its lease, and the two others each seen inside a part at once; then a
# chunk row of 25 bytes: its part fails, the job is incomplete (exit 3, no
# report, no range cut).
# --work refused inside the volume's objects: a directory of its file
# storage, a prefix under NAME/ of its bucket (exit 2, nothing written).
# And once (the first engine, the first layout): a LIST of one range's leaf
# failing at the store (503 SlowDown after the retries): the job ends
# incomplete (exit 3, "complete": false), no report is written, no object
# is deleted.
#
# Ports: JO_PORT_BASE+0 redis, +4 the S3 shim, +10..+13 SeaweedFS (+10010..),
# +24 PostgreSQL, +26/+27 etcd, +30.. juicefs metrics.
export JO_PORT_BASE=${JO_PORT_BASE:-9700}
. "$(dirname "$0")/lib/init.sh" engines leakcheck
J=$JO_BIN
[ -x "$J" ] || jo_die "$J not built"
PY=$JO_VENV/bin/python
AGE=${LKC_AGE:-15}
FAILS=0
ok() { echo "ok   - $*"; }
bad() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

engine_start redis
start_seaweed $((JO_PORT_BASE + 10))
start_s3_shim $((JO_PORT_BASE + 4))
SH=$JO_SHIM_ENDPOINT
LAYOUTS=${LKC_LAYOUTS:-plain hash sharded}
declare -A META STORE NAME SHB

# build LAYOUT: the volume, its files, what to plant (planted later)
build() {
	local l=$1 name=lkc$l d=$JO_T/$l i r eng=redis
	case $l in v*) eng=${l#v} ;; esac
	mkdir -p "$d/src"
	engine_meta "$eng" "$name"
	META[$l]=$JO_META
	NAME[$l]=$name
	case $l in
	plain | hash | v*)
		s3_mkbucket "$name"
		jfs_format "$JO_META" "$JO_S3_ENDPOINT/$name" "$name" --block-size 64K --trash-days 0 \
			$([ "$l" = hash ] && echo --hash-prefix)
		STORE[$l]=s3:$name
		SHB[$l]=$SH/$name
		;;
	sharded)
		for i in 0 1 2; do s3_mkbucket "$name-$i"; done
		jfs_format "$JO_META" "$JO_S3_ENDPOINT/$name-%d" "$name" --shards 3 --block-size 64K \
			--trash-days 0
		STORE[$l]="s3:$name-%d:3"
		SHB[$l]="$SH/$name-%d"
		;;
	esac
	# hash-prefix: an old volume's slice ids, past 10^6 (no range is cut
	# below it) and across the 3,000,000 boundary of chunks/HH/A/
	[ "$l" != hash ] || redis-cli -h 127.0.0.1 -p "$JO_REDIS_PORT" -n "${JO_META##*/}" \
		SET nextchunk 2990000 >/dev/null
	# each juicefs session takes its own batch of slice ids: several leaves
	for r in 1 2 3; do
		for i in 1 2 3 4; do
			head -c $(( (i * 77711 + r * 1231) % 300000 + 1 )) /dev/urandom >"$d/src/f$r-$i"
		done
		jfs_sync_in "$d/src" "${META[$l]}"
	done
	# the volumes scanned in parts: 300 small files in one session more, so
	# that their inodes' low bytes (etcd's cut) and chunk rows spread
	if [ "$eng" != redis ]; then
		mkdir -p "$d/src/many"
		for i in $(seq 1 300); do echo "$i" >"$d/src/many/m$i"; done
		jfs_sync_in "$d/src" "${META[$l]}"
	fi
	rm -f "$d/src/f1-2" "$d/src/f2-3"
	JO_SYNC_META=${META[$l]} "$JUICEFS" sync --no-agent --delete-dst "$d/src/" "jfs://JO_SYNC_META/" \
		>"$d/sync-del.log" 2>&1 || { jo_tail "$d/sync-del.log"; jo_die "juicefs sync --delete-dst failed"; }
	LK_STORE=${STORE[$l]} LK_NAME=$name
	jfs_dump "${META[$l]}" "$d/dump.json"
	lk_keys >"$d/keys.txt"
	$LK_TOOL plan "$d/dump.json" "$d/keys.txt" >"$d/plan.txt" || jo_die "plan failed"
}

# plant LAYOUT KIND: the plan's objects of KIND (old: also the removal, the
# foreign keys and an old object past the counter)
plant() {
	local l=$1 kind=$2 d=$JO_T/$1 k key size next
	LK_STORE=${STORE[$l]} LK_NAME=${NAME[$l]}
	while read -r k key size; do
		[ "$k" = "$kind" ] || continue
		head -c "$size" /dev/urandom >"$d/blk"
		lk_put "$key" "$d/blk"
	done <"$d/plan.txt"
	[ "$kind" = old ] || return 0
	key=$(awk '$1 == "remove" {print $2}' "$d/plan.txt")
	lk_del "$key"
	next=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["Counters"]["nextChunk"])' "$d/dump.json")
	echo junk >"$d/blk"
	for key in stray 0/junk 0/zz/x 12/junk; do lk_put "$LK_NAME/chunks/$key" "$d/blk"; done
	if [ "$l" = hash ]; then
		for key in 0A/junk 0A/zz/y 0C/0/junk 0C/0/7_0_5; do lk_put "$LK_NAME/chunks/$key" "$d/blk"; done
		key=$(printf '%s/chunks/%02X/%d/%d_0_5' "$LK_NAME" $(((next + 100) % 256)) $(((next + 100) / 1000000)) $((next + 100)))
	else
		key=$LK_NAME/chunks/$(((next + 100) / 1000000))/$(((next + 100) / 1000))/$((next + 100))_0_5
	fi
	lk_put "$key" "$d/blk"
}

sorted_lines() { # REPORT: its lines, each with its keys sorted, the lines sorted
	"$PY" -c 'import json,sys
print("\n".join(sorted(json.dumps(json.loads(l), sort_keys=True) for l in open(sys.argv[1]))))' "$1"
}
field() { "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])[sys.argv[2]])' "$1" "$2"; }

# volumes whose metadata is scanned in parts (plain layout): "v" + the engine
PVOLS=
for e in ${LKC_PART_ENGINES:-postgres etcd}; do engine_start "$e"; PVOLS="$PVOLS v$e"; done
for l in $LAYOUTS $PVOLS; do build "$l"; done
for l in $LAYOUTS $PVOLS; do plant "$l" old; done
sleep $((AGE + 2))
for l in $LAYOUTS $PVOLS; do plant "$l" recent; done

# the one-host reports, and every job's plan, before the recent plants grow old
LKC=("$J" leakcheck --min-age "${AGE}s" --list-threads 4)
for l in $LAYOUTS $PVOLS; do
	rc=0
	"${LKC[@]}" "${META[$l]}" --out "$JO_T/$l/one.jsonl" --json >"$JO_T/$l/one.json" \
		2>"$JO_T/$l/one.err" || rc=$?
	[ $rc = 1 ] || { cat "$JO_T/$l/one.err"; jo_die "$l: one-host leakcheck exit $rc"; }
	[ "$(grep -c '"type":"foreign"' "$JO_T/$l/one.jsonl")" -ge 4 ] || bad "$l: one-host run: foreign keys not reported"
done
declare -A CO WORK
# --work in a bucket: its keys from the environment, its staging files in a directory watched here
s3_mkbucket lkcwork
export JFSOPS_WORK_ACCESS_KEY=$JO_S3_AK JFSOPS_WORK_SECRET_KEY=$JO_S3_SK TMPDIR=$JO_T/tmp
mkdir -p "$TMPDIR"
k=0
for e in ${JO_ENGINES:-redis postgres etcd}; do
	engine_start "$e"
	for l in $LAYOUTS; do
		engine_meta "$e" "lkco$l"
		CO[$e/$l]=$JO_META
		if [ $((k++ % 2)) = 1 ]; then
			WORK[$e/$l]="s3://lkcwork/$e-$l?endpoint=$JO_S3_ENDPOINT&path_style=1"
		else
			WORK[$e/$l]=$JO_T/work-$e-$l
			mkdir -p "${WORK[$e/$l]}"
		fi
		rc=0
		"${LKC[@]}" "${META[$l]}" --bucket "${SHB[$l]}" --cluster "${CO[$e/$l]}" \
			--work "${WORK[$e/$l]}" --plan --ranges 6 --json >"$JO_T/plan-$e-$l.json" \
			2>"$JO_T/plan-$e-$l.err" || rc=$?
		[ $rc = 0 ] || { cat "$JO_T/plan-$e-$l.err"; jo_die "$e/$l: --plan exit $rc"; }
	done
done
# the volumes scanned in parts: a Redis coordinator, 4 scan parts
for l in $PVOLS; do
	engine_meta redis "lkco$l"
	CO[redis/$l]=$JO_META
	WORK[redis/$l]=$JO_T/work-redis-$l
	mkdir -p "${WORK[redis/$l]}"
	"${LKC[@]}" "${META[$l]}" --bucket "${SHB[$l]}" --cluster "${CO[redis/$l]}" \
		--work "${WORK[redis/$l]}" --plan --ranges 4 --scan-parts 4 2>"$JO_T/plan-$l.err" ||
		{ cat "$JO_T/plan-$l.err"; jo_die "$l: --plan failed"; }
	# a run no done record names (as a killed worker may leave): never read
	f=$(echo "${WORK[redis/$l]}"/*/p*)
	[ -d "$f" ] || jo_die "$l: no plan directory under ${WORK[redis/$l]}"
	head -c 4096 /dev/urandom >"$f/scan-000000-1-00000000.run"
done
# a job whose one range's listing is cut (below): planned now too
FE=$(echo ${JO_ENGINES:-redis postgres etcd} | awk '{print $1}')
FL=$(echo $LAYOUTS | awk '{print $1}')
mkdir -p "$JO_T/work-fault"
"${LKC[@]}" "${META[$FL]}" --bucket "${SHB[$FL]}" --cluster "${CO[$FE/$FL]}" --work "$JO_T/work-fault" \
	--plan --ranges 6 2>"$JO_T/plan-fault.err" || { cat "$JO_T/plan-fault.err"; jo_die "fault: --plan failed"; }

status_json() { # E L: the job's --status --json
	"${LKC[@]}" "${META[$2]}" --bucket "${SHB[$2]}" --cluster "${CO[$1/$2]}" --work "${WORK[$1/$2]}" \
		--status --json
}

# job_end LABEL DIR L "WORKERS" CMD...: the workers (their pids in the
# caller's variables of those names) end with exit 1 (found); the job's
# report (CMD without --plan/--worker) has the one-host report's lines and
# counters
job_end() {
	local lab=$1 d=$2 l=$3 ws=$4 i rc f
	shift 4
	for i in $ws; do
		rc=0
		wait "${!i}" || rc=$?
		[ $rc = 1 ] || { cat "$d/$i.err"; bad "$lab: worker $i exit $rc, expected 1 (found)"; }
	done
	rc=0
	"$@" --out "$d/report.jsonl" >"$d/report.json" 2>"$d/report.err" || rc=$?
	[ $rc = 1 ] || { cat "$d/report.err"; bad "$lab: the job's report: exit $rc, expected 1"; }
	diff <(sorted_lines "$JO_T/$l/one.jsonl") <(sorted_lines "$d/report.jsonl") >"$d/diff" &&
		ok "$lab: the job's report has the one-host report's lines" ||
		{ head -20 "$d/diff"; bad "$lab: the job's report differs from the one-host report"; }
	for f in objects leaked leaked_bytes missing skipped foreign slices skipped_new_slice; do
		[ "$(field "$JO_T/$l/one.json" $f)" = "$(field "$d/report.json" $f)" ] ||
			bad "$lab: $f: one host $(field "$JO_T/$l/one.json" $f), job $(field "$d/report.json" $f)"
	done
}

# every LIST takes a while: a worker is caught in the middle of a range
shim_rules '[{"kinds": ["list"], "action": "delay", "delay_ms": 80}]'
job() { # E L
	local e=$1 l=$2 d=$JO_T/job-$1-$2 i rc held=0 w1 w2 w1b w3
	local W=("${LKC[@]}" "${META[$l]}" --bucket "${SHB[$l]}" --cluster "${CO[$e/$l]}"
		--work "${WORK[$e/$l]}" --lease 3s --json)
	mkdir -p "$d"
	"${W[@]}" --worker --worker-id w1 >"$d/w1.json" 2>"$d/w1.err" &
	w1=$!
	for i in $(seq 1 200); do
		if status_json "$e" "$l" 2>/dev/null | grep -q '"owner":"w1"'; then held=1; break; fi
		sleep 0.05
	done
	kill -9 $w1 2>/dev/null || true
	wait $w1 2>/dev/null || true
	[ $held = 1 ] && ok "$e/$l: w1 killed while it held a range" || bad "$e/$l: w1 never seen holding a range"
	"${W[@]}" --worker --worker-id w2 --out "$d/w2.jsonl" --metrics-file "$d/w2.prom" >"$d/w2.json" \
		2>"$d/w2.err" &
	w2=$!
	"${W[@]}" --worker --worker-id w1b >"$d/w1b.json" 2>"$d/w1b.err" &
	w1b=$!
	sleep 1
	"${W[@]}" --worker --worker-id w3 >"$d/w3.json" 2>"$d/w3.err" &
	w3=$!
	job_end "$e/$l" "$d" "$l" "w2 w1b w3" "${W[@]}"
	# and in its order, but for the foreign lines (listed by many threads, on one host too)
	diff <(grep -v '"type":"foreign"' "$JO_T/$l/one.jsonl") <(grep -v '"type":"foreign"' "$d/report.jsonl") \
		>"$d/diff-order" && [ "$(grep -c . "$d/diff-order" || true)" = 0 ] &&
		[ "$(grep -n '"type":"foreign"' "$d/report.jsonl" | tail -1 | cut -d: -f1)" = \
		  "$(grep -c '"type":"foreign"' "$d/report.jsonl")" ] &&
		ok "$e/$l: line for line in the one-host order (foreign lines first)" ||
		{ head -20 "$d/diff-order"; bad "$e/$l: the job's report is not in the one-host order"; }
	cmp -s "$d/report.jsonl" "$d/w2.jsonl" && ok "$e/$l: the worker's --out is the job's report" ||
		bad "$e/$l: w2's --out differs from the job's report"
	case ${WORK[$e/$l]} in s3://*)
		"$PY" "$JO_REPO/tests/tools/s3util.py" list "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" lkcwork \
			"$e-$l/" >"$d/work-keys.txt"
		grep -Eq "^$e-$l/l[0-9a-f]{15}/p[0-9a-f]+/scan-[0-9]+-[0-9]+-[0-9a-f]+\.run " "$d/work-keys.txt" &&
			grep -Eq "^$e-$l/l[0-9a-f]{15}/p[0-9a-f]+/out-[0-9]+-[0-9]+-[0-9a-f]+\.jsonl " "$d/work-keys.txt" &&
			[ -z "$(ls -A "$TMPDIR" | grep -i jfsops || true)" ] &&
			ok "$e/$l: --work in a bucket: the runs and range reports under its prefix, no staging file left" ||
			{ head "$d/work-keys.txt"; ls -A "$TMPDIR"; bad "$e/$l: --work in a bucket: its keys"; } ;;
	esac
	"$PY" "$JO_REPO/tests/tools/promcheck.py" leakcheck "$d/w2.prom" exit=1 success=1 \
		"volume=${NAME[$l]}" >&2 &&
		grep -q '^jfsops_leakcheck_last_run_leaked_objects{.*worker="w2"' "$d/w2.prom" &&
		grep -q '^jfsops_leakcheck_job_ranges{.*worker="w2".*state="done"' "$d/w2.prom" &&
		grep -q '^jfsops_leakcheck_job_scan_parts{.*worker="w2".*state="planned"} 1$' "$d/w2.prom" &&
		ok "$e/$l: w2's metrics: the job's counters and ranges, labelled worker=\"w2\"" ||
		bad "$e/$l: w2's metrics file"
	if [ "$e/$l" = "$FE/$FL" ]; then
		# --delete-from takes the job's report as a one-host report
		rc=0
		"$J" leakcheck "${META[$l]}" --delete-from "$d/report.jsonl" --dry-run --min-age "${AGE}s" \
			--json >"$d/del.json" 2>"$d/del.err" || rc=$?
		[ $rc = 0 ] && [ "$(field "$d/del.json" would_delete)" = "$(field "$d/report.json" leaked)" ] &&
			ok "$e/$l: --delete-from --dry-run of the job's report: every leaked line would go" ||
			{ cat "$d/del.err"; bad "$e/$l: --delete-from of the job's report: exit $rc"; }
	fi
	status_json "$e" "$l" >"$d/status.json"
	"$PY" - "$d/status.json" <<'PY' && ok "$e/$l: --status: every range done once, none failed" || bad "$e/$l: --status"
import json, sys
s = json.load(open(sys.argv[1]))
r = s["ranges"]
assert s["state"] == "complete", s["state"]
assert r["planned"] >= 3 and r["done"] == r["planned"] and r["failed"] == 0 and r["leased"] == 0, r
names = {w["worker"] for w in s["workers"]}
assert {"w2", "w1b", "w3"} <= names, names
assert sum(w["ranges"] for w in s["workers"] if w["worker"] != "w1") <= r["planned"], s["workers"]
PY
}
for e in ${JO_ENGINES:-redis postgres etcd}; do
	for l in $LAYOUTS; do job "$e" "$l"; done
	echo "leakcheck_cluster: $e ok" >&2
done

# ---- the reference scan spread over parts and workers (SQL, etcd volumes)
# holds PART LIST: a worker of LIST is seen holding a scan part, each of them
holds_parts() {
	local l=$1 i w
	shift
	for i in $(seq 1 200); do
		status_json redis "$l" 2>/dev/null >"$JO_T/hold.json" || true
		for w in "$@"; do
			"$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))
sys.exit(0 if any(x.get("kind") == "scan" and x["owner"] == sys.argv[2] for x in s["leases"]) else 1)' \
				"$JO_T/hold.json" "$w" 2>/dev/null || continue 2
		done
		return 0
	done
	return 1
}
parts_job() { # L: PostgreSQL: jfs_chunk locked, so that workers are caught inside their parts
	local l=$1 d=$JO_T/job-$1 i n locker=
	local W=("${LKC[@]}" "${META[$l]}" --bucket "${SHB[$l]}" --cluster "${CO[redis/$l]}"
		--work "${WORK[redis/$l]}" --lease 3s --json)
	mkdir -p "$d"
	if [ "$l" = vpostgres ]; then
		PGAPPNAME=lkclock psql -h "$JO_PG_SOCK" -p "$JO_PG_PORT" -U postgres -Atq "${NAME[$l]}" \
			-c "BEGIN; LOCK TABLE jfs_chunk IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(120); COMMIT;" \
			>/dev/null 2>&1 &
		locker=$!
		for i in $(seq 1 100); do
			[ "$(pg_sql "${NAME[$l]}" "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'jfs_chunk' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ] && break
			sleep 0.1
		done
		"${W[@]}" --worker --worker-id w1 >"$d/w1.json" 2>"$d/w1.err" &
		i=$!
		holds_parts "$l" w1 && ok "$l: w1 killed inside a scan part" || bad "$l: w1 never seen holding a scan part"
		# two tasks in flight (the default): both of w1's slots inside a scan part
		for n in $(seq 1 100); do
			status_json redis "$l" 2>/dev/null >"$JO_T/hold.json" || true
			[ "$("$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))
print(sum(1 for x in s["leases"] if x.get("kind") == "scan" and x["owner"] == "w1"))' "$JO_T/hold.json" 2>/dev/null)" = 2 ] && break
			sleep 0.05
		done
		[ "$n" -lt 100 ] && ok "$l: w1 inside two scan parts at once (--ranges-in-flight 2)" ||
			bad "$l: w1 never seen holding two scan parts"
		kill -9 $i 2>/dev/null || true
		wait $i 2>/dev/null || true
	fi
	"${W[@]}" --worker --worker-id w2 --out "$d/w2.jsonl" >"$d/w2.json" 2>"$d/w2.err" &
	local w2=$!
	"${W[@]}" --worker --worker-id w3 >"$d/w3.json" 2>"$d/w3.err" &
	local w3=$!
	if [ -n "$locker" ]; then
		holds_parts "$l" w2 w3 && ok "$l: w2 and w3 each inside a scan part at once" ||
			bad "$l: w2 and w3 not seen inside scan parts together"
		pg_sql "${NAME[$l]}" "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lkclock'" >/dev/null
		wait $locker 2>/dev/null || true
	fi
	job_end "$l" "$d" "$l" "w2 w3" "${W[@]}"
	cmp -s "$d/report.jsonl" "$d/w2.jsonl" && ok "$l: the worker's --out is the job's report" ||
		bad "$l: w2's --out differs from the job's report"
	status_json redis "$l" >"$d/status.json"
	"$PY" - "$d/status.json" "$l" <<'PY' && ok "$l: --status: the scan in 4 chunk parts and the extras, each done once, chunks in every part" || bad "$l: --status of the scan parts"
import json, sys
s, l = json.load(open(sys.argv[1])), sys.argv[2]
p = s["parts"]
assert s["state"] == "complete", s["state"]
# 4 chunk parts and the extras (slice references, delayed slices), each done once
assert p["planned"] == 5 and p["done"] == 5 and p["failed"] == 0, p
assert [x["part"] for x in p["scanned"]] == [0, 1, 2, 3, 4] and p["scanned"][4]["chunks"] == 0, p
# the chunks spread over the parts: every chunk part holds some
assert all(x["chunks"] > 0 for x in p["scanned"][:4]), p["scanned"]
by = {x["by"] for x in p["scanned"]}
print(f"{l}: parts by worker: " + ", ".join(f'{x["part"]}:{x["by"]}({x["chunks"]} chunks)' for x in p["scanned"]), file=sys.stderr)
if l == "vpostgres":
    assert "w1" not in by and by == {"w2", "w3"}, by    # w1's part redone after its lease
w = {x["worker"]: x for x in s["workers"]}
assert sum(x["parts"] for x in w.values()) == 5, w
PY
}
for l in $PVOLS; do parts_job "$l"; done
# a scan part that cannot be read whole (a chunk row of 25 bytes): the job is incomplete
if [ -n "${META[vpostgres]:-}" ]; then
	l=vpostgres
	mkdir -p "$JO_T/work-badpart"
	P=("${LKC[@]}" "${META[$l]}" --bucket "${SHB[$l]}" --cluster "${CO[redis/$l]}"
		--work "$JO_T/work-badpart" --json)
	"${P[@]}" --plan --scan-parts 4 2>"$JO_T/badpart-plan.err" ||
		{ cat "$JO_T/badpart-plan.err"; jo_die "badpart: --plan failed"; }
	pg_sql "${NAME[$l]}" "UPDATE jfs_chunk SET slices = slices || '\\x00'::bytea WHERE id = (SELECT max(id) FROM jfs_chunk)"
	rc=0
	"${P[@]}" --worker --max-attempts 1 --out "$JO_T/badpart.jsonl" >"$JO_T/badpart.json" \
		2>"$JO_T/badpart.err" || rc=$?
	pg_sql "${NAME[$l]}" "UPDATE jfs_chunk SET slices = substring(slices from 1 for length(slices) - 1) WHERE id = (SELECT max(id) FROM jfs_chunk)"
	[ $rc = 3 ] && [ ! -e "$JO_T/badpart.jsonl" ] && grep -q '"complete":false' "$JO_T/badpart.json" &&
		grep -q 'INCOMPLETE' "$JO_T/badpart.err" &&
		ok "badpart: a scan part not read whole: exit 3, complete false, no report" ||
		{ cat "$JO_T/badpart.err"; bad "badpart: worker exit $rc"; }
	"${LKC[@]}" "${META[$l]}" --cluster "${CO[redis/$l]}" --work "$JO_T/work-badpart" --status --json \
		>"$JO_T/badpart-status.json"
	"$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["state"]=="incomplete" and s["parts"]["failed"]==1 and s["ranges"]["planned"]==0, s' \
		"$JO_T/badpart-status.json" && ok "badpart: --status: incomplete, one part failed, no range cut" ||
		bad "badpart: --status"
fi
[ -z "$PVOLS" ] || echo "leakcheck_cluster: scan parts ok" >&2

# ---- a range's listing cut at the store: the job stays incomplete
# a leaf in the middle of the volume's live keys: its LIST always fails (after the retries)
FLEAF=$(grep -v -e '/chunks/[^/]*$' "$JO_T/$FL/keys.txt" | awk '{print $1}' | sort | awk '{k[NR]=$0} END {print k[int((NR+1)/2)]}')
FLEAF=${FLEAF%/*}/
echo "fault: LIST of $FLEAF fails" >&2
shim_rules "[{\"kinds\": [\"list\"], \"list_prefix\": \"$FLEAF\", \"action\": \"error\", \"status\": 503, \"code\": \"SlowDown\"}]"
LK_STORE=${STORE[$FL]} LK_NAME=${NAME[$FL]}
lk_keys | sort >"$JO_T/fault-before.txt"
F=("${LKC[@]}" "${META[$FL]}" --bucket "${SHB[$FL]}" --cluster "${CO[$FE/$FL]}" --work "$JO_T/work-fault" --retries 0 --json)
rc=0
"${F[@]}" --worker --worker-id wf --max-attempts 1 --out "$JO_T/fault.jsonl" >"$JO_T/fault-w.json" \
	2>"$JO_T/fault-w.err" || rc=$?
[ $rc = 3 ] && ok "fault: the worker exits 3" || { cat "$JO_T/fault-w.err"; bad "fault: worker exit $rc, expected 3"; }
[ ! -e "$JO_T/fault.jsonl" ] && ok "fault: the worker wrote no report" || bad "fault: a report was written"
grep -q '"complete":false' "$JO_T/fault-w.json" || bad "fault: the worker's summary is not \"complete\": false"
grep -q 'INCOMPLETE' "$JO_T/fault-w.err" || bad "fault: no INCOMPLETE line"
rc=0
"${F[@]}" --out "$JO_T/fault2.jsonl" >"$JO_T/fault-r.json" 2>"$JO_T/fault-r.err" || rc=$?
[ $rc = 3 ] && [ ! -e "$JO_T/fault2.jsonl" ] && grep -q '"complete":false' "$JO_T/fault-r.json" &&
	ok "fault: the job's report is refused: exit 3, complete false, no file" ||
	{ cat "$JO_T/fault-r.err"; bad "fault: report-only run: exit $rc"; }
"${LKC[@]}" "${META[$FL]}" --cluster "${CO[$FE/$FL]}" --work "$JO_T/work-fault" --status --json \
	>"$JO_T/fault-status.json"
"$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["state"]=="incomplete" and s["ranges"]["failed"]>=1, s' \
	"$JO_T/fault-status.json" && ok "fault: --status: incomplete, the range(s) of the leaf failed" || bad "fault: --status"
shim_clear
lk_keys | sort >"$JO_T/fault-after.txt"
cmp -s "$JO_T/fault-before.txt" "$JO_T/fault-after.txt" && ok "fault: no object deleted" ||
	bad "fault: the objects changed"

# --work inside the volume's objects is refused (file storage)
mkdir -p "$JO_T/fbucket"
engine_meta redis lkcfile
jfs_format "$JO_META" "$JO_T/fbucket" lkcfile --trash-days 0
mkdir -p "$JO_T/fbucket/lkcfile/chunks/w"
rc=0
"$J" leakcheck "$JO_META" --cluster "${CO[$FE/$FL]}" --work "$JO_T/fbucket/lkcfile/chunks/w" --plan \
	2>"$JO_T/inside.err" || rc=$?
[ $rc = 2 ] && grep -q 'inside the volume' "$JO_T/inside.err" && ok "--work inside the volume refused (exit 2)" ||
	{ cat "$JO_T/inside.err"; bad "--work inside the volume: exit $rc"; }
# and under NAME/ of the volume's bucket (s3)
rc=0
"$J" leakcheck "${META[$FL]}" --cluster "${CO[$FE/$FL]}" --plan \
	--work "s3://${NAME[$FL]}/${NAME[$FL]}/jobs?endpoint=$JO_S3_ENDPOINT&path_style=1" \
	2>"$JO_T/inside-s3.err" || rc=$?
"$PY" "$JO_REPO/tests/tools/s3util.py" list "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" "${NAME[$FL]}" \
	"${NAME[$FL]}/jobs/" >"$JO_T/inside-s3.keys"
[ $rc = 2 ] && grep -q 'inside the volume' "$JO_T/inside-s3.err" && [ ! -s "$JO_T/inside-s3.keys" ] &&
	ok "--work under the volume's NAME/ in its bucket refused (exit 2), nothing written" ||
	{ cat "$JO_T/inside-s3.err"; bad "--work under the volume's prefix: exit $rc"; }

[ $FAILS = 0 ] || { echo "leakcheck_cluster: $FAILS failure(s); data in $JO_T" >&2; JO_KEEP=1; exit 1; }
echo "leakcheck_cluster: ok"
