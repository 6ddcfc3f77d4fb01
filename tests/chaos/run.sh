#!/usr/bin/env bash
# tests/chaos/run.sh: the crash campaign. Random SIGKILLs of
#   gc        gc workers (1-4 sharing planned tasks, or one plan+work run)
#   compact   compaction workers (one process with threads, or planned tasks
#             shared by several workers)
#   leakcheck `leakcheck --delete-from` (with a quarantine archive)
#   sync      `jfsops sync` (local dir -> SeaweedFS, SeaweedFS -> local dir;
#             multipart objects, --delete-dst)
# at a random moment (a random fraction of the expected run time, or when
# the Nth audit / "copied" line appears), each followed by the rerun an
# operator would do and the referee checks:
#   - volumes: `juicefs gc` finds nothing leaked or pending, `juicefs fsck`
#     is clean, the bucket holds exactly the blocks `juicefs dump`
#     references, and every surviving file (read through a fresh mount)
#     keeps its sha256;
#   - sync: DST == SRC by the md5 of every object, and a dry run plans
#     nothing.
# Volumes: Redis + SeaweedFS and SQLite + file storage, the kinds
# alternating between them round by round. Files are written through a
# JuiceFS mount that runs with --no-bgjob --max-deletes 0 (it leaves its
# deletions to jfsops gc).
#
#   bash tests/chaos/run.sh                 # CHAOS_N=3 rounds per kind
#   CHAOS_N=100 bash tests/chaos/run.sh     # the long campaign
#   CHAOS_SEED=1234 CHAOS_KINDS=gc CHAOS_N=7 bash tests/chaos/run.sh   # replay
#
# Env: CHAOS_N (rounds per kind, default 3), CHAOS_SEED (default: random,
# printed first; every random choice of a round - data, worker counts,
# rates, kill mode and moment - comes from SEED, the kind and the round, so
# a failing round is replayed with the same seed and kinds; the kill lands
# at the same point in time or audit line, which on a different machine
# load may be a slightly different point of the run), CHAOS_KINDS (default
# "gc compact leakcheck sync"), JO_PORT_BASE (Redis BASE, SeaweedFS
# BASE+10..13, juicefs metrics BASE+30..50), JFSOPS_BIN, JO_KEEP=1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/../integration/lib/compact.sh" # FRAG, compact_max_records; gc.sh: GCTOOL, gc_*

CHAOS_N=${CHAOS_N:-3}
CHAOS_KINDS=${CHAOS_KINDS:-gc compact leakcheck sync}
if [ -z "${CHAOS_SEED:-}" ]; then
	CHAOS_SEED=$(($(od -An -tu4 -N4 /dev/urandom) % 1000000000))
fi
case $CHAOS_N in '' | *[!0-9]*) jo_die "CHAOS_N must be a number" ;; esac
case $CHAOS_SEED in '' | *[!0-9]*) jo_die "CHAOS_SEED must be a number" ;; esac
for k in $CHAOS_KINDS; do
	case $k in gc | compact | leakcheck | sync) ;; *) jo_die "CHAOS_KINDS: unknown kind '$k'" ;; esac
done
echo "chaos: CHAOS_SEED=$CHAOS_SEED CHAOS_N=$CHAOS_N CHAOS_KINDS='$CHAOS_KINDS'"

jo_setup
[ -x "$JO_BIN" ] || jo_die "$JO_BIN is not built"
PY=$JO_VENV/bin/python
CT="$PY $here/chaos_tool.py"
T0=$SECONDS
CH_CTX="setup"
CH_LOG=$JO_T/setup.log
exec 3>&1 4>&2 # the campaign's own stdout/stderr, whatever a round redirects
ch_exit() {
	local rc=$?
	set +e
	exec 1>&3 2>&4
	if [ $rc != 0 ]; then
		echo "chaos: FAILED in $CH_CTX" >&2
		[ -f "$CH_LOG" ] && { echo "---- last lines of $CH_LOG" >&2; tail -n 25 "$CH_LOG" >&2; }
		echo "chaos: replay with CHAOS_SEED=$CHAOS_SEED CHAOS_KINDS='$CHAOS_KINDS' CHAOS_N=$CHAOS_N" >&2
		JO_KEEP=1
	fi
	(exit $rc)
	jo_cleanup
}
trap 'ch_exit || exit $?' EXIT

ch_fail() {
	echo "chaos: $*" >&2
	exit 1
}

# ---------------------------------------------------------------- randomness
# rnd VAR LO HI: an integer in [LO, HI] from the round's generator.
rnd() {
	CH_RNG=$(((CH_RNG * 1103515245 + 12345) % 2147483648))
	printf -v "$1" '%d' $(($2 + (CH_RNG >> 4) % ($3 - $2 + 1)))
}
# rnd_s VAR LO_MS HI_MS: seconds with three decimals.
rnd_s() {
	local ms
	rnd ms "$2" "$3"
	printf -v "$1" '%d.%03d' $((ms / 1000)) $((ms % 1000))
}
# ch_round_seed KIND ROUND: seed the generator for one round.
ch_round_seed() {
	CH_RNG=$(printf '%s:%s:%s' "$CHAOS_SEED" "$1" "$2" | cksum | cut -d' ' -f1)
	CH_RNG=$((CH_RNG % 2147483648))
	rnd CH_DATA_SEED 1 1000000000
}

# ---------------------------------------------------------------- kills
ch_alive() {
	local st
	[ -r "/proc/$1/stat" ] || return 1
	read -r _ _ st _ <"/proc/$1/stat" 2>/dev/null || return 1
	[ "$st" != Z ]
}
# ch_kill MODE ARG FILE VICTIM...: MODE time: sleep ARG seconds; MODE lines:
# wait until FILE holds ARG lines (those matching CH_KILL_PAT when set) or
# every victim ended (120 s at most). Then SIGKILL every victim still
# running. Sets CH_WAITED (seconds waited).
ch_kill() {
	local mode=$1 arg=$2 file=$3 p n t=$SECONDS
	shift 3
	if [ "$mode" = time ]; then
		sleep "$arg"
	else
		while [ $((SECONDS - t)) -lt 120 ]; do
			n=0
			if [ -f "$file" ]; then
				if [ -n "${CH_KILL_PAT:-}" ]; then
					n=$(grep -c -- "$CH_KILL_PAT" "$file" || true)
				else
					n=$(wc -l <"$file")
				fi
			fi
			[ "$n" -ge "$arg" ] && break
			local any=0
			for p in "$@"; do ch_alive "$p" && any=1; done
			[ $any = 1 ] || break
			sleep 0.02
		done
	fi
	for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
	CH_WAITED=$((SECONDS - t))
}
# ch_wait_all VAR PID...: wait for each; VAR gets "killed ok other" counts
# (other: exit codes other than 0 and SIGKILL, listed in CH_OTHER).
ch_wait_all() {
	local var=$1 p rc k=0 o=0 x=0
	shift
	CH_OTHER=
	for p in "$@"; do
		rc=0
		wait "$p" || rc=$?
		if [ -n "${CH_WLOG[$p]:-}" ]; then
			# (a worker killed right after the fork never opened its log)
			[ ! -f "${CH_WLOG[$p]}" ] || cat "${CH_WLOG[$p]}" >>"$CH_LOG"
			rm -f "${CH_WLOG[$p]}"
			unset "CH_WLOG[$p]"
		fi
		case $rc in
		0) o=$((o + 1)) ;;
		137) k=$((k + 1)) ;;
		*) x=$((x + 1)); CH_OTHER="$CH_OTHER $rc" ;;
		esac
	done
	printf -v "$var" '%d %d %d' $k $o $x
	CH_KILLED=$((CH_KILLED + k))
}
# ch_lease_lost_only KIND: the workers that were not killed exited 0 (gc's
# status tasks-left, a task under a killed worker's lease, exits 0), or 10
# (a lease lost, e.g. a renewal late on a loaded machine: a documented
# outcome that leaves the task to the next run)
ch_lease_lost_only() {
	local c
	for c in $CH_OTHER; do
		[ "$c" = 10 ] || ch_fail "$1: a worker that was not killed exited with$CH_OTHER"
	done
}
# ch_how N: how a kill went, for the round's line
ch_how() { if [ "$1" -gt 0 ]; then echo "killed"; else echo "missed: it had finished"; fi; }

# ---------------------------------------------------------------- volumes
declare -A CH_META CH_BUCKET CH_NAME CH_MP CH_WLOG
CH_ENGINES=(sqlite redis)
ch_setup_volumes() {
	start_redis "$JO_PORT_BASE"
	start_seaweed $((JO_PORT_BASE + 10))
	s3_mkbucket chaosred
	s3_mkbucket chsync
	CH_META[sqlite]="sqlite3://$JO_T/chaos.db"
	CH_BUCKET[sqlite]="$JO_T/bucket"
	CH_NAME[sqlite]=chaossql
	CH_META[redis]="redis://127.0.0.1:$JO_REDIS_PORT/1"
	CH_BUCKET[redis]="$JO_S3_ENDPOINT/chaosred"
	CH_NAME[redis]=chaosred
	jfs_format "${CH_META[sqlite]}" "${CH_BUCKET[sqlite]}" chaossql --trash-days 0 --block-size 1M
	jfs_format "${CH_META[redis]}" "${CH_BUCKET[redis]}" chaosred --trash-days 0 --block-size 1M \
		--compress lz4
	local e
	for e in "${CH_ENGINES[@]}"; do
		CH_MP[$e]=$JO_T/mnt-$e
		ch_mount "$e"
		: >"$JO_T/mirrors-$e"
		# files that stay for the whole campaign
		python3 "$GCTOOL" write "${CH_MP[$e]}/base" "$JO_T/mir-base-$e" "$CHAOS_SEED" 40 $((3 << 20))
		ch_register "$e" "${CH_MP[$e]}/base" "$JO_T/mir-base-$e"
	done
}
# the writers' mount: no block cache (reads come from the object store),
# no background jobs, deletions left to gc
ch_mount() { JO_CACHE_MB=0 jfs_mount "${CH_META[$1]}" "${CH_MP[$1]}" --no-bgjob --max-deletes 0; }

# ch_register E DIR MIRROR / ch_forget E DIR: files whose sha256 must survive.
ch_register() { echo "$2 $3" >>"$JO_T/mirrors-$1"; }
ch_forget() {
	local e=$1 dir=$2
	grep -vF "$dir " "$JO_T/mirrors-$e" >"$JO_T/mirrors-$e.new" || true
	mv "$JO_T/mirrors-$e.new" "$JO_T/mirrors-$e"
}

ch_status_tasks() { # META gc|compact: recorded tasks
	if [ "$2" = gc ]; then
		"$JO_BIN" gc "$1" --status --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["tasks"])'
	else
		"$JO_BIN" compact "$1" --status | sed -n 's/^compaction tasks: \([0-9]*\) recorded.*/\1/p'
	fi
}

# ch_referee E: the end state every round must reach on volume E.
ch_referee() {
	local e=$1 meta=${CH_META[$1]} bucket=${CH_BUCKET[$1]} name=${CH_NAME[$1]} w
	local log=$JO_T/ref-gc.log i
	jo_log "referee: juicefs gc"
	# juicefs itself once exited 0 having printed nothing at all (on a machine
	# at load 25): a referee that said nothing is asked again, never believed
	for i in 1 2 3; do
		gc_juicefs_gc "$meta" "$log"
		python3 "$GCTOOL" gcline "$log" >/dev/null 2>&1 && break
		[ $i -lt 3 ] || ch_fail "referee: juicefs gc printed no summary, three times"
		jo_log "referee: juicefs gc printed no summary (exit 0, $(wc -c <"$log") bytes): asking again"
		CH_FLAKES=$((CH_FLAKES + 1))
	done
	for w in leaked pending compacted; do
		[ "$(gc_count "$log" $w)" = 0 ] || ch_fail "referee: juicefs gc: $(python3 "$GCTOOL" gcline "$log")"
	done
	jo_log "referee: juicefs fsck, dump, bucket listing"
	for i in 1 2 3; do
		"$JUICEFS" fsck "$meta" --no-agent >"$JO_T/ref-fsck.log" 2>&1 ||
			{ tail -n 20 "$JO_T/ref-fsck.log" >&2; ch_fail "referee: juicefs fsck failed"; }
		grep -q 'Found [0-9]* blocks' "$JO_T/ref-fsck.log" && break
		[ $i -lt 3 ] || ch_fail "referee: juicefs fsck printed no 'Found N blocks' line, three times"
		jo_log "referee: juicefs fsck printed no block count: asking again"
		CH_FLAKES=$((CH_FLAKES + 1))
	done
	jfs_dump "$meta" "$JO_T/ref-dump.json"
	python3 "$GCTOOL" refkeys "$JO_T/ref-dump.json" | sort -u >"$JO_T/ref-keys.txt"
	gc_bucket_keys "$bucket" "$name" >"$JO_T/ref-have.txt"
	if ! cmp -s "$JO_T/ref-keys.txt" "$JO_T/ref-have.txt"; then
		diff "$JO_T/ref-keys.txt" "$JO_T/ref-have.txt" | head -n 10 >&2 || true
		ch_fail "referee: the bucket does not hold exactly the referenced blocks (< referenced only, > bucket only)"
	fi
	# a fresh client reads every surviving file back
	jo_log "referee: remount, verify"
	jfs_umount "${CH_MP[$e]}"
	ch_mount "$e"
	local dir mir n=0
	while read -r dir mir; do
		python3 "$GCTOOL" verify "$dir" "$mir" 2>>"$CH_LOG" || ch_fail "referee: files under $dir changed"
		n=$((n + $(wc -l <"$mir")))
	done <"$JO_T/mirrors-$e"
	jo_log "referee: done"
	CH_REF="fsck ok, $(wc -l <"$JO_T/ref-keys.txt") blocks = referenced, $n files verified"
}

# ---------------------------------------------------------------- gc
ch_round_gc() {
	local r=$1 e=$2 meta=${CH_META[$2]} mp=${CH_MP[$2]}
	local count old d
	# garbage: files written (a quarter sharing slices by copy_file_range),
	# half removed; everything of rounds two back removed
	rnd count 60 200
	python3 "$GCTOOL" write "$mp/g$r" "$JO_T/mir-g$r" "$CH_DATA_SEED" "$count" $((3 << 20))
	python3 "$GCTOOL" remove "$mp/g$r" "$JO_T/mir-g$r" "$CH_DATA_SEED" >/dev/null
	ch_register "$e" "$mp/g$r" "$JO_T/mir-g$r"
	for d in "$mp"/g* "$mp"/c*; do
		[ -d "$d" ] || continue
		old=${d##*/}
		[ "${old:1}" -le $((r - 2)) ] || continue
		rm -rf "$d"
		ch_forget "$e" "$d"
	done
	local objects
	objects=$("$JO_BIN" gc "$meta" --json | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read().splitlines()[-1])["objects"])')
	local mode w rate tsize batch kmode karg i pids=() victims=() audit=$JO_T/gc-audit-$r.jsonl
	rnd mode 0 3 # 0-2: planned tasks shared by W workers; 3: one plan+work run
	rnd rate 10 120
	rnd tsize 1 12
	rnd batch 1 50
	if [ "$mode" = 3 ]; then w=1; else rnd w 1 4; fi
	local expect_ms=$(((objects + 1) * 1000 / (rate * w) * 9 / 10 + 100))
	rnd kmode 0 1
	if [ "$kmode" = 0 ]; then kmode=time; rnd_s karg 0 "$expect_ms"; else kmode=lines; rnd karg 1 $((objects + 1)); fi
	if [ "$mode" = 3 ]; then
		"$JO_BIN" gc "$meta" --delete --id "r$r" --lease 2s --task-size "$tsize" --delete-rate "$rate" \
			--batch "$batch" --audit "$audit" >>"$CH_LOG" 2>&1 &
		pids=($!)
		victims=("${pids[@]}")
	else
		"$JO_BIN" gc "$meta" --plan --delete --task-size "$tsize" >>"$CH_LOG" 2>&1 ||
			ch_fail "gc: plan failed"
		for i in $(seq 1 "$w"); do
			"$JO_BIN" gc "$meta" --worker --delete --id "r$r-w$i" --lease 2s --delete-rate "$rate" \
				--batch "$batch" --audit "$audit" >"$JO_T/gcw-$r-$i.log" 2>&1 &
			pids+=($!)
			CH_WLOG[$!]=$JO_T/gcw-$r-$i.log
		done
		# each worker is killed with probability 3/4 (at least one is)
		for i in "${pids[@]}"; do
			local coin
			rnd coin 0 3
			[ "$coin" = 0 ] || victims+=("$i")
		done
		[ ${#victims[@]} -gt 0 ] || victims=("${pids[0]}")
	fi
	ch_kill "$kmode" "$karg" "$audit" "${victims[@]}"
	local res
	ch_wait_all res "${pids[@]}"
	set -- $res
	ch_lease_lost_only gc
	local before=0
	[ -f "$audit" ] && before=$(wc -l <"$audit")
	# the operator's rerun, once the dead workers' leases (2 s) have expired
	sleep 2.5
	timeout 300 "$JO_BIN" gc "$meta" --delete --lease 2s --audit "$audit" >>"$CH_LOG" 2>&1 ||
		ch_fail "gc: the rerun failed (exit $?)"
	local left
	left=$(ch_status_tasks "$meta" gc)
	[ "$left" = 0 ] || ch_fail "gc: $left tasks left after the rerun"
	ch_referee "$e"
	local what="plan + $w workers"
	[ "$mode" = 3 ] && what="one plan+work run"
	CH_LINE="$objects objects, $what at $rate/s, tasks of $tsize, batches of $batch; SIGKILL $1 of ${#pids[@]} at $kmode $karg ($before deleted before); rerun ok; $CH_REF"
}

# ---------------------------------------------------------------- compact
ch_round_compact() {
	local r=$1 e=$2 meta=${CH_META[$2]} mp=${CH_MP[$2]}
	local nf i nw size cm=$JO_T/cmir-$r
	mkdir -p "$mp/c$r" "$cm"
	rnd nf 1 3
	for i in $(seq 1 "$nf"); do
		rnd nw 40 85
		rnd size $((1 << 20)) $((6 << 20))
		python3 "$FRAG" "$mp/c$r/f$i" "$cm/f$i" $((CH_DATA_SEED + i)) "$nw" "$size"
	done
	(cd "$cm" && sha256sum f*) >"$JO_T/mir-c$r"
	ch_register "$e" "$mp/c$r" "$JO_T/mir-c$r"
	local recs ctr
	recs=$(compact_max_records "$meta")
	[ "$recs" -ge 40 ] || ch_fail "compact: the most records in a chunk is $recs, expected 40+"
	ctr=$("$JO_BIN" info "$meta" --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["next_slice_id"])')
	local mode w th kmode karg pids=() victims=() audit=$JO_T/compact-audit-$r.jsonl
	rnd mode 0 1 # 0: one process with threads; 1: planned tasks shared by W workers
	rnd th 1 4
	rnd kmode 0 2
	case $kmode in
	0 | 1) kmode=time; rnd_s karg 0 600 ;;
	2) kmode=lines; rnd karg 1 40 ;;
	esac
	if [ "$mode" = 0 ]; then
		w=1
		"$JO_BIN" compact "$meta" --apply -q --threads "$th" --lease 2s --task-size 1 --id "r$r" \
			--audit "$audit" >>"$CH_LOG" 2>&1 &
		pids=($!)
	else
		rnd w 2 3
		"$JO_BIN" compact "$meta" --plan --apply -q --task-size 1 >>"$CH_LOG" 2>&1 ||
			ch_fail "compact: plan failed"
		for i in $(seq 1 "$w"); do
			"$JO_BIN" compact "$meta" --worker --apply -q --threads "$th" --lease 2s --id "r$r-w$i" \
				--audit "$audit" >>"$CH_LOG" 2>&1 &
			pids+=($!)
		done
	fi
	victims=("${pids[@]}")
	ch_kill "$kmode" "$karg" "$audit" "${victims[@]}"
	local res
	ch_wait_all res "${pids[@]}"
	set -- $res
	ch_lease_lost_only compact
	local killed
	killed=$(ch_how "$1")
	sleep 2.5
	timeout 300 "$JO_BIN" compact "$meta" --apply -q --lease 2s >>"$CH_LOG" 2>&1 ||
		ch_fail "compact: the rerun failed (exit $?)"
	local left
	left=$(ch_status_tasks "$meta" compact)
	[ "$left" = 0 ] || ch_fail "compact: $left tasks left after the rerun"
	local after
	after=$(compact_max_records "$meta")
	[ "$after" -le 2 ] || ch_fail "compact: a chunk still holds $after records after the rerun"
	# the documented recovery: old slices whose deletion was cut off are
	# pending for gc; a compaction killed before its commit leaves its new
	# slice's blocks unreferenced, which leakcheck finds (and only those)
	timeout 300 "$JO_BIN" gc "$meta" --delete >>"$CH_LOG" 2>&1 || ch_fail "compact: gc --delete failed (exit $?)"
	local rep=$JO_T/compact-leaks-$r.jsonl lrc=0 lo
	"$JO_BIN" leakcheck "$meta" --min-age 0s --out "$rep" >>"$CH_LOG" 2>&1 || lrc=$?
	[ $lrc -le 1 ] || ch_fail "compact: leakcheck failed (exit $lrc)"
	lo=$($CT leftovers "$rep" "$ctr") || ch_fail "compact: leakcheck finds more than a killed compaction's leftovers"
	set -- $lo
	if [ "$1" -gt 0 ]; then
		"$JO_BIN" leakcheck "$meta" --delete-from "$rep" --min-age 0s >>"$CH_LOG" 2>&1 ||
			ch_fail "compact: leakcheck --delete-from failed"
	fi
	# a killed writer's temp files on file storage (foreign: never deleted by
	# jfsops; juicefs gc counts them as leaked): an operator removes them
	local k
	while read -r k; do
		case ${CH_BUCKET[$e]} in http://*) ch_fail "compact: foreign object $k on S3" ;; esac
		rm -f "${CH_BUCKET[$e]}/$k"
	done <"$rep.foreign"
	ch_referee "$e"
	local what="one process, $th threads"
	[ "$mode" = 1 ] && what="$w workers x $th threads"
	CH_LINE="$nf files, $recs records max; $what; SIGKILL at $kmode $karg ($killed); rerun: $recs -> $after records; orphans of the kill: $1 blocks, $2 temp files; $CH_REF"
}

# ---------------------------------------------------------------- leakcheck
ch_round_leakcheck() {
	local r=$1 e=$2 meta=${CH_META[$2]} bucket=${CH_BUCKET[$2]} name=${CH_NAME[$2]}
	local n plan=$JO_T/leak-plan-$r.txt rep=$JO_T/leak-report-$r.jsonl minage
	rnd n 40 400
	jfs_dump "$meta" "$JO_T/leak-dump.json"
	gc_bucket_keys "$bucket" "$name" >"$JO_T/leak-keys.txt"
	$CT plant "$JO_T/leak-dump.json" "$JO_T/leak-keys.txt" "$CH_DATA_SEED" "$n" >"$plan" ||
		ch_fail "leakcheck: planting failed"
	case $bucket in
	http://*)
		$CT put s3 "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" "${bucket##*/}" "$plan"
		sleep 2
		minage=1s
		;;
	*)
		$CT put file "$bucket" "$plan"
		minage=1h
		;;
	esac
	local nleak lrc=0
	nleak=$(grep -c '^leak ' "$plan")
	"$JO_BIN" leakcheck "$meta" --min-age "$minage" --out "$rep" >>"$CH_LOG" 2>&1 || lrc=$?
	[ $lrc = 1 ] || ch_fail "leakcheck: exit $lrc with $nleak planted leaks, expected 1"
	$CT report "$rep" "$plan" || ch_fail "leakcheck: the report is not the planted leaks"
	# decoys: live blocks listed as leaked must be kept
	local kind key size
	while read -r kind key size; do
		[ "$kind" = decoy ] || continue
		printf '{"type":"leaked","key":"%s","slice":0,"size":%s,"reason":"unreferenced"}\n' "$key" "$size" >>"$rep"
	done <"$plan"
	local rate kmode karg q1=$JO_T/q-$r-1.tar.zst q2=$JO_T/q-$r-2.tar.zst
	rnd rate 30 400
	rnd kmode 0 9
	if [ "$kmode" = 0 ]; then karg=0.0$kmode; else rnd_s karg 0 $((nleak * 1000 / rate * 9 / 10 + 150)); fi
	kmode=time
	"$JO_BIN" leakcheck "$meta" --delete-from "$rep" --min-age "$minage" --delete-rate "$rate" \
		--quarantine "$q1" --audit "$JO_T/leak-audit-$r.jsonl" >>"$CH_LOG" 2>&1 &
	local pid=$! res
	ch_kill "$kmode" "$karg" "" "$pid"
	ch_wait_all res "$pid"
	set -- $res
	[ "$3" = 0 ] || ch_fail "leakcheck: --delete-from exited with$CH_OTHER"
	local killed
	killed=$(ch_how "$1")
	# nothing may be gone that is not in the published archive
	gc_bucket_keys "$bucket" "$name" >"$JO_T/leak-have.txt"
	awk '$1 == "leak" {print $2}' "$plan" | sort >"$JO_T/leak-planted.txt"
	comm -23 "$JO_T/leak-planted.txt" "$JO_T/leak-have.txt" >"$JO_T/leak-gone1.txt"
	: >"$JO_T/leak-q1.txt"
	[ -f "$q1" ] && tar --zstd -tf "$q1" | sort >"$JO_T/leak-q1.txt"
	[ "$(comm -23 "$JO_T/leak-gone1.txt" "$JO_T/leak-q1.txt" | wc -l)" = 0 ] ||
		ch_fail "leakcheck: objects were deleted before the quarantine archive held them: $(comm -23 "$JO_T/leak-gone1.txt" "$JO_T/leak-q1.txt" | head -n 3 | tr '\n' ' ')"
	local gone1
	gone1=$(wc -l <"$JO_T/leak-gone1.txt")
	# the rerun (a new archive: the old one is the record of the first run)
	timeout 300 "$JO_BIN" leakcheck "$meta" --delete-from "$rep" --min-age "$minage" \
		--quarantine "$q2" --audit "$JO_T/leak-audit-$r.jsonl" >>"$CH_LOG" 2>&1 ||
		ch_fail "leakcheck: the rerun failed (exit $?)"
	gc_bucket_keys "$bucket" "$name" >"$JO_T/leak-have.txt"
	[ "$(comm -12 "$JO_T/leak-planted.txt" "$JO_T/leak-have.txt" | wc -l)" = 0 ] ||
		ch_fail "leakcheck: planted leaks are left after the rerun"
	while read -r kind key size; do
		[ "$kind" = decoy ] || continue
		grep -qxF "$key" "$JO_T/leak-have.txt" || ch_fail "leakcheck: the live block $key was deleted"
	done <"$plan"
	{ cat "$JO_T/leak-q1.txt"; [ -f "$q2" ] && tar --zstd -tf "$q2"; } | sort -u >"$JO_T/leak-q.txt"
	[ "$(comm -23 "$JO_T/leak-planted.txt" "$JO_T/leak-q.txt" | wc -l)" = 0 ] ||
		ch_fail "leakcheck: deleted objects missing from both quarantine archives"
	ch_referee "$e"
	CH_LINE="$nleak planted leaks + 2 decoys, $rate deletes/s; SIGKILL at $kmode $karg ($killed; $gone1 deleted before, all in the archive); rerun deleted the rest, decoys kept, every object quarantined; $CH_REF"
}

# ---------------------------------------------------------------- sync
CH_SYNC_SRC=$JO_T/sync-src
CH_SYNC_DIR=$JO_T/sync-dst
ch_sync_md5() { # SIDE-URL-KIND ... : "key md5" lines
	case $1 in
	dir) $CT dirmd5 "$2" ;;
	s3) $CT s3md5 "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" chsync "$2" ;;
	esac
}
ch_round_sync() {
	local r=$1 lane src dst st skind sarg dkind darg
	local s3url="s3://chsync/a?endpoint=$JO_S3_ENDPOINT&path_style=1"
	export JFSOPS_SRC_ACCESS_KEY=$JO_S3_AK JFSOPS_SRC_SECRET_KEY=$JO_S3_SK
	export JFSOPS_DST_ACCESS_KEY=$JO_S3_AK JFSOPS_DST_SECRET_KEY=$JO_S3_SK
	if [ $((r % 2)) = 1 ] || [ ! -d "$CH_SYNC_SRC" ]; then
		lane="dir -> s3"
		$CT syncmut "$CH_SYNC_SRC" "$CH_DATA_SEED"
		src=$CH_SYNC_SRC dst=$s3url st=$JO_T/sync-a.db
		skind=dir sarg=$CH_SYNC_SRC dkind=s3 darg=a
	else
		lane="s3 -> dir"
		# the destination also drifts: files removed and extras added
		mkdir -p "$CH_SYNC_DIR"
		local f i=0
		while IFS= read -r f; do
			i=$((i + 1))
			[ $((i % 9)) = 0 ] && rm -f "$f"
		done < <(find "$CH_SYNC_DIR" -type f | sort)
		mkdir -p "$CH_SYNC_DIR/extra"
		head -c 1234 /dev/urandom >"$CH_SYNC_DIR/extra/x$r"
		src=$s3url dst=$CH_SYNC_DIR st=$JO_T/sync-b.db
		skind=s3 sarg=a dkind=dir darg=$CH_SYNC_DIR
	fi
	local common=(--multipart-threshold 5M --part-size 5M --state "$st")
	local bytes ncopy
	"$JO_BIN" sync -q --json --dry-run --delete-dst "${common[@]}" "$src" "$dst" >"$JO_T/sync-dry.json" ||
		ch_fail "sync: dry run failed"
	bytes=$($CT last "$JO_T/sync-dry.json" would_copy_bytes)
	ncopy=$($CT last "$JO_T/sync-dry.json" would_copy)
	local bw tr del kmode karg resume
	rnd bw 4 16
	rnd tr 2 16
	rnd del 0 2 # 0: the killed run has no --delete-dst
	rnd resume 0 1
	local delf=()
	[ "$del" = 0 ] || delf=(--delete-dst)
	rnd kmode 0 1
	if [ "$kmode" = 0 ] || [ "$ncopy" = 0 ]; then
		kmode=time
		rnd_s karg 0 $((bytes * 1000 / (bw << 20) * 8 / 10 + 100))
	else
		kmode=lines
		rnd karg 1 $((ncopy > 1 ? ncopy - 1 : 1))
	fi
	local vlog=$JO_T/sync-v-$r.log
	"$JO_BIN" sync -v "${common[@]}" "${delf[@]}" --transfers "$tr" --bwlimit "${bw}M" \
		"$src" "$dst" >>"$CH_LOG" 2>"$vlog" &
	local pid=$! res
	CH_KILL_PAT='copied "' ch_kill "$kmode" "$karg" "$vlog" "$pid"
	ch_wait_all res "$pid"
	set -- $res
	[ "$3" = 0 ] || ch_fail "sync: exited with$CH_OTHER"
	local killed
	killed=$(ch_how "$1")
	local done_before
	done_before=$(grep -c 'copied "' "$vlog" || true)
	cat "$vlog" >>"$CH_LOG"
	# the rerun: --resume (then a full run with --delete-dst must copy
	# nothing), or straight away a full run with --delete-dst
	if [ "$resume" = 1 ]; then
		timeout 300 "$JO_BIN" sync -q --json --resume "${common[@]}" "$src" "$dst" >"$JO_T/sync-re.json" 2>>"$CH_LOG" ||
			ch_fail "sync: the --resume rerun failed (exit $?)"
		timeout 300 "$JO_BIN" sync -q --json --delete-dst "${common[@]}" "$src" "$dst" >"$JO_T/sync-re2.json" 2>>"$CH_LOG" ||
			ch_fail "sync: the full run after --resume failed (exit $?)"
		[ "$($CT last "$JO_T/sync-re2.json" copied)" = 0 ] ||
			ch_fail "sync: after --resume finished, a full run still copied $($CT last "$JO_T/sync-re2.json" copied) objects"
	else
		timeout 300 "$JO_BIN" sync -q --json --delete-dst "${common[@]}" "$src" "$dst" >"$JO_T/sync-re.json" 2>>"$CH_LOG" ||
			ch_fail "sync: the rerun failed (exit $?)"
	fi
	"$JO_BIN" sync -q --json --dry-run --delete-dst "${common[@]}" "$src" "$dst" >"$JO_T/sync-dry2.json" ||
		ch_fail "sync: the final dry run failed"
	[ "$($CT last "$JO_T/sync-dry2.json" would_copy)/$($CT last "$JO_T/sync-dry2.json" would_delete)" = 0/0 ] ||
		ch_fail "sync: a dry run after the rerun still plans copies or deletions"
	ch_sync_md5 "$skind" "$sarg" >"$JO_T/sync-md5-src.txt"
	ch_sync_md5 "$dkind" "$darg" >"$JO_T/sync-md5-dst.txt"
	if ! cmp -s "$JO_T/sync-md5-src.txt" "$JO_T/sync-md5-dst.txt"; then
		diff "$JO_T/sync-md5-src.txt" "$JO_T/sync-md5-dst.txt" | head -n 10 >&2 || true
		ch_fail "sync: DST differs from SRC (md5 of every object)"
	fi
	local temps=0
	if [ "$dkind" = dir ]; then
		temps=$(find "$CH_SYNC_DIR" -name '.jfs.*.tmp.*' | wc -l)
		find "$CH_SYNC_DIR" -name '.jfs.*.tmp.*' -delete
	fi
	local how=full
	[ "$resume" = 1 ] && how="--resume, then full"
	CH_LINE="$lane: $ncopy objects ($((bytes >> 20)) MiB) to copy at ${bw} MiB/s, $tr transfers${delf:+, --delete-dst}; SIGKILL at $kmode $karg ($killed; $done_before copied before); rerun $how; DST == SRC ($(wc -l <"$JO_T/sync-md5-src.txt") objects by md5)$([ "$temps" = 0 ] || echo "; $temps temp files of the killed run removed")"
}

# ---------------------------------------------------------------- campaign
CH_LOG=$JO_T/setup.log
ch_setup_volumes >>"$CH_LOG" 2>&1
echo "chaos: Redis + SeaweedFS and SQLite + file volumes ready ($((SECONDS - T0)) s)"
mkdir -p "$JO_T/rounds"
declare -A CH_DONE CH_LANDED
CH_TFLAKES=0
nk=0
for k in $CHAOS_KINDS; do nk=$((nk + 1)); done
total=0
for r in $(seq 1 "$CHAOS_N"); do
	ki=0
	for k in $CHAOS_KINDS; do
		ki=$((ki + 1))
		e=${CH_ENGINES[$(((r + ki) % 2))]}
		[ "$k" = sync ] && e=s3
		total=$((total + 1))
		CH_CTX="round $r of $k ($e)"
		CH_LOG=$JO_T/rounds/$(printf '%03d' "$r")-$k.log
		ch_round_seed "$k" "$r"
		t=$SECONDS
		CH_LINE=
		CH_KILLED=0
		CH_FLAKES=0
		"ch_round_$k" "$r" "$e" >>"$CH_LOG" 2>&1 </dev/null
		[ "$CH_FLAKES" = 0 ] || CH_LINE="$CH_LINE; a referee printed nothing and was asked again ($CH_FLAKES)"
		printf 'chaos: %-9s round %3d %-6s %3ds  %s\n' "$k" "$r" "$e" $((SECONDS - t)) "$CH_LINE"
		CH_TFLAKES=$((CH_TFLAKES + CH_FLAKES))
		CH_DONE[$k]=$((${CH_DONE[$k]:-0} + 1))
		[ "$CH_KILLED" = 0 ] || CH_LANDED[$k]=$((${CH_LANDED[$k]:-0} + 1))
	done
done
CH_CTX="the end"
el=$((SECONDS - T0))
summary=
for k in $CHAOS_KINDS; do summary="$summary $k ${CH_DONE[$k]} (${CH_LANDED[$k]:-0} killed mid-run),"; done
echo "chaos: ok: $total rounds, every referee check passed: ${summary# }"
echo "chaos: seed $CHAOS_SEED, $((el / 60)) min $((el % 60)) s; referee reruns after an empty juicefs output: $CH_TFLAKES"
