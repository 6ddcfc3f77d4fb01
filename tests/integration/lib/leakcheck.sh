# shellcheck shell=bash
# tests/integration/lib/leakcheck.sh: shared steps of the leakcheck_<variant>.sh
# integration tests. Source after tests/lib/services.sh and jo_setup.
#
#   lk_run_variant META STORE
#     STORE: "file:DIR" (objects in DIR/NAME/chunks/...), or "s3:BUCKET" /
#     "s3:PATTERN:N" (SeaweedFS, N shards named by the printf PATTERN).
# Fills the (already formatted) volume with `juicefs sync`, rewrites and
# deletes some files, plants leaked objects (old and recent, valid keys of
# unreferenced slice ids, and one failing the size rule), removes one real
# block, then checks:
#   - the report lists exactly the planted leaks as leaked, the removed block
#     as missing, the recent plant as skipped (exit 1);
#   - its leaked count equals `juicefs gc`'s on the same volume;
#   - --delete-from with --quarantine deletes exactly the leaks (a decoy line
#     for a live block is kept), after which a re-check with the removed
#     block put back is clean and `juicefs fsck` passes;
#   - --restore brings every quarantined object back (the leaks reappear).
# Old objects: file storage gets its mtimes set back with touch -d; on S3 the
# test waits LK_AGE seconds and runs with --min-age LK_AGE (gc gets
# JFS_GC_SKIPPEDTIME).

LK_TOOL="${JO_VENV:-$JO_REPO/.venv}/bin/python $JO_REPO/tests/integration/lib/leakcheck_tool.py"
LK_FAIL=0

lk_fail() {
	echo "FAIL: $*" >&2
	LK_FAIL=$((LK_FAIL + 1))
}

# storage helpers, keyed on $LK_STORE
lk_buckets() {
	local kind=${LK_STORE%%:*} rest=${LK_STORE#*:}
	if [ "$kind" = file ]; then echo "$rest"; return; fi
	case $rest in
	*:*) local pat=${rest%:*} n=${rest##*:} i
		for ((i = 0; i < n; i++)); do printf "$pat\n" "$i"; done ;;
	*) echo "$rest" ;;
	esac
}

lk_bucket_of() {
	local key=$1 rest=${LK_STORE#*:}
	case $rest in
	*:*) local pat=${rest%:*} n=${rest##*:}
		# shellcheck disable=SC2059
		printf "$pat" "$($LK_TOOL shard "$key" "$n")" ;;
	*) echo "$rest" ;;
	esac
}

lk_keys() { # all keys under NAME/chunks/, "KEY SIZE" lines
	local b
	if [ "${LK_STORE%%:*}" = file ]; then
		(cd "${LK_STORE#file:}" && find "$LK_NAME/chunks" -type f -printf '%p %s\n')
		return
	fi
	for b in $(lk_buckets); do
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/s3util.py" list "$JO_S3_ENDPOINT" \
			"$JO_S3_AK" "$JO_S3_SK" "$b" "$LK_NAME/chunks/" | awk '{print $1, $2}'
	done
}

lk_put() { # KEY FILE
	if [ "${LK_STORE%%:*}" = file ]; then
		mkdir -p "$(dirname "${LK_STORE#file:}/$1")"
		cp "$2" "${LK_STORE#file:}/$1"
	else
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/s3util.py" put "$JO_S3_ENDPOINT" \
			"$JO_S3_AK" "$JO_S3_SK" "$(lk_bucket_of "$1")" "$1" "$2"
	fi
}

lk_get() { # KEY > stdout
	if [ "${LK_STORE%%:*}" = file ]; then
		cat "${LK_STORE#file:}/$1"
	else
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/s3util.py" get "$JO_S3_ENDPOINT" \
			"$JO_S3_AK" "$JO_S3_SK" "$(lk_bucket_of "$1")" "$1"
	fi
}

lk_del() { # KEY
	if [ "${LK_STORE%%:*}" = file ]; then
		rm -f "${LK_STORE#file:}/$1"
	else
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/s3util.py" delete "$JO_S3_ENDPOINT" \
			"$JO_S3_AK" "$JO_S3_SK" "$(lk_bucket_of "$1")" "$1"
	fi
}

lk_age_all() { # file storage: make every object old
	[ "${LK_STORE%%:*}" = file ] || return 0
	find "${LK_STORE#file:}/$LK_NAME/chunks" -type f -exec touch -d '3 hours ago' {} +
}

lk_gc_leaked() {
	local log=$JO_T/gc-$RANDOM.log
	JFS_GC_SKIPPEDTIME=$LK_MINAGE "$JUICEFS" gc --no-agent "$LK_META" >"$log" 2>&1 ||
		{ jo_tail "$log"; jo_die "juicefs gc failed"; }
	$LK_TOOL gcleaked "$log"
}

lk_run_variant() {
	LK_META=$1
	LK_STORE=$2
	local src=$JO_T/src d=$JO_T/lk rc i
	mkdir -p "$src" "$d"
	"$JUICEFS" status --no-agent "$LK_META" >"$d/status.json" 2>/dev/null ||
		jo_die "juicefs status failed"
	LK_NAME=$("$JO_VENV/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["Setting"]["Name"])' "$d/status.json")

	# 1. files: written, rewritten (old inode to trash/delfiles), deleted
	for i in $(seq 1 12); do
		head -c $(( (i * 377711) % 3000000 + 1 )) /dev/urandom >"$src/f$i"
	done
	mkdir -p "$src/sub"
	head -c 5000000 /dev/urandom >"$src/sub/big"
	jfs_sync_in "$src" "$LK_META"
	for i in 3 7; do head -c 654321 /dev/urandom >"$src/f$i"; done
	jfs_sync_in "$src" "$LK_META"      # changed size: replaced
	rm -f "$src/f5" "$src/f9"
	local log=$JO_T/sync-del.log
	JO_SYNC_META=$LK_META "$JUICEFS" sync --no-agent --delete-dst "$src/" "jfs://JO_SYNC_META/" \
		>"$log" 2>&1 || { jo_tail "$log"; jo_die "juicefs sync --delete-dst failed"; }

	# 2. plan from the real state
	jfs_dump "$LK_META" "$d/dump.json"
	lk_keys >"$d/keys.txt"
	$LK_TOOL plan "$d/dump.json" "$d/keys.txt" >"$d/plan.txt" || jo_die "plan failed"
	echo "plan:" >&2; sed 's/^/  /' "$d/plan.txt" >&2
	local key size removed decoy
	removed=$(awk '$1 == "remove" {print $2}' "$d/plan.txt")
	decoy=$(awk '$1 == "decoy" {print $2}' "$d/plan.txt")
	lk_get "$removed" >"$d/removed.blk"
	lk_del "$removed"
	while read -r kind key size; do
		[ "$kind" = old ] || continue
		head -c "$size" /dev/urandom >"$d/blk"
		lk_put "$key" "$d/blk"
	done <"$d/plan.txt"
	if [ "${LK_STORE%%:*}" = file ]; then
		LK_MINAGE=3600
		lk_age_all
	else
		LK_MINAGE=${LK_AGE:-20}
		sleep $((LK_MINAGE + 2))
	fi
	while read -r kind key size; do
		[ "$kind" = recent ] || continue
		head -c "$size" /dev/urandom >"$d/blk"
		lk_put "$key" "$d/blk"
	done <"$d/plan.txt"

	# 3. the check
	rc=0
	"$JO_BIN" leakcheck "$LK_META" --min-age "${LK_MINAGE}s" --out "$d/out.jsonl" --json \
		--list-threads 8 --mem-limit 16M >"$d/summary.json" 2>"$d/check.err" || rc=$?
	cat "$d/check.err" >&2
	[ $rc = 1 ] || lk_fail "leakcheck exit $rc, expected 1"
	$LK_TOOL check "$d/out.jsonl" "$d/plan.txt" || lk_fail "report differs from the plan"
	local ours gc
	ours=$("$JO_VENV/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["leaked"])' "$d/summary.json")
	gc=$(lk_gc_leaked)
	echo "leaked: jfsops $ours, juicefs gc $gc" >&2
	[ "$ours" = "$gc" ] || lk_fail "leaked count $ours != juicefs gc $gc"
	[ "$ours" = "$(grep -c '^old' "$d/plan.txt")" ] || lk_fail "leaked count $ours != planted"

	# 4. deletion with quarantine; a decoy line for a live block must be kept
	cp "$d/out.jsonl" "$d/cands.jsonl"
	printf '{"type":"leaked","key":"%s","slice":0,"size":%s,"reason":"unreferenced"}\n' \
		"$decoy" "$(lk_get "$decoy" | wc -c)" >>"$d/cands.jsonl"
	rc=0
	"$JO_BIN" leakcheck "$LK_META" --delete-from "$d/cands.jsonl" --min-age "${LK_MINAGE}s" \
		--quarantine "$d/q.tar.zst" --audit "$d/audit.jsonl" --json >"$d/del.json" 2>"$d/del.err" || rc=$?
	cat "$d/del.err" >&2
	[ $rc = 0 ] || lk_fail "--delete-from exit $rc"
	grep -q "\"key\":\"$decoy\".*\"result\":\"kept: referenced\"" "$d/audit.jsonl" ||
		lk_fail "decoy not kept as referenced"
	[ "$(grep -c '"result":"deleted"' "$d/audit.jsonl")" = "$(grep -c '^old' "$d/plan.txt")" ] ||
		lk_fail "audit: wrong number of deletions"
	lk_get "$decoy" >/dev/null || lk_fail "decoy block was deleted"

	# 5. put the removed block back: clean report (recent plant still skipped), fsck ok
	lk_put "$removed" "$d/removed.blk"
	rc=0
	"$JO_BIN" leakcheck "$LK_META" --min-age "${LK_MINAGE}s" --out "$d/out2.jsonl" --json \
		>"$d/summary2.json" 2>/dev/null || rc=$?
	[ $rc = 0 ] || lk_fail "after deletion: leakcheck exit $rc, expected 0"
	grep -v '^old\|^remove' "$d/plan.txt" >"$d/plan2.txt"
	$LK_TOOL check "$d/out2.jsonl" "$d/plan2.txt" || lk_fail "after deletion: report not clean"
	"$JUICEFS" fsck --no-agent "$LK_META" >"$d/fsck.log" 2>&1 || { jo_tail "$d/fsck.log"; lk_fail "juicefs fsck failed"; }

	# 6. restore the quarantine: the leaks are back
	"$JO_BIN" leakcheck "$LK_META" --restore "$d/q.tar.zst" 2>"$d/restore.err" || lk_fail "restore failed"
	if [ "${LK_STORE%%:*}" = file ]; then lk_age_all; fi
	rc=0
	"$JO_BIN" leakcheck "$LK_META" --min-age "${LK_MINAGE}s" --out "$d/out3.jsonl" --json \
		>"$d/summary3.json" 2>/dev/null || rc=$?
	if [ "${LK_STORE%%:*}" = file ]; then
		# every object was aged again, the recent plant included
		grep -v '^remove' "$d/plan.txt" | sed 's/^recent/old/' >"$d/plan3.txt"
		$LK_TOOL check "$d/out3.jsonl" "$d/plan3.txt" || lk_fail "after restore: leaks not back"
	else
		# restored objects are new again on S3: they come back as skipped
		n=$(grep -c '"type":"skipped"' "$d/out3.jsonl" || true)
		[ "$n" = $(( $(grep -c '^old' "$d/plan.txt") + 1 )) ] || lk_fail "after restore: $n skipped"
	fi
	# every quarantined object came back byte for byte
	mkdir -p "$d/qx"
	tar --zstd -xf "$d/q.tar.zst" -C "$d/qx"
	while read -r kind key size; do
		[ "$kind" = old ] || continue
		cmp -s "$d/qx/$key" <(lk_get "$key") || lk_fail "restored $key differs"
	done <"$d/plan.txt"

	if [ $LK_FAIL -ne 0 ]; then
		echo "leakcheck variant: $LK_FAIL failure(s); data in $d" >&2
		JO_KEEP=1
		return 1
	fi
	echo "leakcheck variant: ok" >&2
}

# lk_listing_error META: the object store is gone: the run fails (exit >= 2),
# names the failure, leaves no report behind and says it is incomplete (its
# only summary line has "complete": false).
lk_listing_error() {
	local meta=$1 d=$JO_T/lk rc=0
	"$JO_BIN" leakcheck "$meta" --out "$d/broken.jsonl" --json >"$d/broken.json" 2>"$d/broken.err" || rc=$?
	cat "$d/broken.err" >&2
	[ $rc -ge 2 ] || lk_fail "listing error: exit $rc, expected >= 2"
	[ ! -e "$d/broken.jsonl" ] && [ ! -e "$d/broken.jsonl.tmp" ] || lk_fail "listing error: a report was left"
	grep -q '"type":"summary","complete":true' "$d/broken.json" && lk_fail "listing error: a complete summary was printed"
	grep -q '"type":"summary","complete":false' "$d/broken.json" || lk_fail "listing error: no summary with \"complete\": false"
	grep -q 'INCOMPLETE' "$d/broken.err" || lk_fail "listing error: no INCOMPLETE line"
	grep -qi 'list' "$d/broken.err" || lk_fail "listing error: message does not say what failed"
	[ $LK_FAIL -eq 0 ]
}
