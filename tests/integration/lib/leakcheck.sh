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
	# several variants may run in one script: lk, lk2, lk3, ...
	LK_RUNS=$((${LK_RUNS:-0} + 1))
	LK_DIR=$JO_T/lk
	[ "$LK_RUNS" = 1 ] || LK_DIR=$JO_T/lk$LK_RUNS
	local src=$LK_DIR-src d=$LK_DIR rc i
	mkdir -p "$src" "$d"
	# (on MySQL, juicefs's ORM prints "[xorm] [info] PING DATABASE" lines first)
	"$JUICEFS" status --no-agent "$LK_META" 2>/dev/null >"$d/status.out" ||
		jo_die "juicefs status failed"
	sed -n '/^{/,$p' "$d/status.out" >"$d/status.json"
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
	$LK_TOOL check "$d/out.jsonl" "$d/plan.txt" "$d/dump.json" || lk_fail "report differs from the plan (or a missing block does not name its files)"
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
	local meta=$1 d=${LK_DIR:-$JO_T/lk} rc=0
	"$JO_BIN" leakcheck "$meta" --out "$d/broken.jsonl" --json >"$d/broken.json" 2>"$d/broken.err" || rc=$?
	cat "$d/broken.err" >&2
	[ $rc -ge 2 ] || lk_fail "listing error: exit $rc, expected >= 2"
	[ ! -e "$d/broken.jsonl" ] && [ ! -e "$d/broken.jsonl.tmp" ] || lk_fail "listing error: a report was left"
	grep -q '"type":"summary",.*"complete":true' "$d/broken.json" && lk_fail "listing error: a complete summary was printed"
	grep -q '"type":"summary",.*"complete":false' "$d/broken.json" || lk_fail "listing error: no summary with \"complete\": false"
	grep -q 'INCOMPLETE' "$d/broken.err" || lk_fail "listing error: no INCOMPLETE line"
	grep -qi 'list' "$d/broken.err" || lk_fail "listing error: message does not say what failed"
	[ $LK_FAIL -eq 0 ]
}

# lk_missing_bucket META [ARGS...]: the bucket (or bucket directory) does not
# exist: one clear line, exit 8 (not found), no report; never an empty
# listing that makes every reference "missing" (exit 1).
lk_missing_bucket() {
	local meta=$1 d=${LK_DIR:-$JO_T/lk} rc=0
	shift
	"$JO_BIN" leakcheck "$meta" "$@" --min-age 0s --out "$d/nobucket.jsonl" --json \
		>"$d/nobucket.json" 2>"$d/nobucket.err" || rc=$?
	cat "$d/nobucket.err" >&2
	[ $rc = 8 ] || lk_fail "missing bucket: exit $rc, expected 8"
	[ "$(wc -l <"$d/nobucket.err")" = 1 ] || lk_fail "missing bucket: $(wc -l <"$d/nobucket.err") lines on stderr, want 1"
	grep -qiE 'does not exist|NoSuchBucket' "$d/nobucket.err" || lk_fail "missing bucket: the message does not say so"
	[ ! -e "$d/nobucket.jsonl" ] || lk_fail "missing bucket: a report was written"
	grep -q '"type":"summary"' "$d/nobucket.json" && lk_fail "missing bucket: a summary was printed"
	[ $LK_FAIL -eq 0 ]
}

# lk_symlinks (file storage, after lk_run_variant): symlinks under chunks/
# are foreign, never followed, never deleted:
#   chunks/77          -> a directory outside the bucket holding old files
#                         named like block keys (followed, they would be
#                         reported and deletable)
#   chunks/A/B/ID_2_5  -> a file outside (ID: a planted, unreferenced slice
#                         below the counter, so a --delete-from line for it
#                         reaches the delete)
#   chunks/root        -> /
# The report lists each link as foreign (reason "symlink") and nothing
# behind them; --delete-from with a forged line for the linked block key
# deletes neither the link nor its target; everything outside is unchanged.
lk_symlinks() {
	local objs=${LK_STORE#file:} d=${LK_DIR:-$JO_T/lk} out=$JO_T/lk-outside rc before after key a dir
	local chunks=$objs/$LK_NAME/chunks
	mkdir -p "$out/77/77000"
	for a in 77000123 77000124; do
		head -c 5 /dev/urandom >"$out/77/77000/${a}_0_5"
	done
	touch -d '3 hours ago' "$out/77/77000/"*
	ln -s "$out/77" "$chunks/77"
	ln -s / "$chunks/root"
	key=$(awk '$1 == "old" {print $2; exit}' "$d/plan.txt")
	a=${key##*/}
	a=${a%%_*}
	dir=${key%/*}
	head -c 5 /dev/urandom >"$out/target.bin"
	touch -d '3 hours ago' "$out/target.bin"
	ln -s "$out/target.bin" "$objs/$dir/${a}_2_5"
	before=$(cd "$out" && find . -printf '%p %s %T@ %y\n' | sort | sha256sum)

	rc=0
	timeout 300 "$JO_BIN" leakcheck "$LK_META" --min-age 1h --out "$d/links.jsonl" --json \
		>"$d/links.json" 2>"$d/links.err" || rc=$?
	[ $rc -le 1 ] || { cat "$d/links.err" >&2; lk_fail "symlinks: leakcheck exit $rc"; }
	"$JO_VENV/bin/python" - "$d/links.jsonl" "$LK_NAME" "$dir/${a}_2_5" <<'PY' || lk_fail "symlinks: the report is wrong"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
name, filelink = sys.argv[2], sys.argv[3]
links = {r["key"] for r in recs if r.get("type") == "foreign" and r.get("reason") == "symlink"}
want = {name + "/chunks/77", name + "/chunks/root", filelink}
assert links == want, (sorted(links), sorted(want))
behind = [r for r in recs if r.get("key", "").startswith((name + "/chunks/77/", name + "/chunks/root/"))]
assert not behind, behind[:3]
assert not [r for r in recs if r.get("key") == filelink and r.get("type") != "foreign"]
print("symlinks: %d reported as foreign, nothing behind them" % len(links), file=sys.stderr)
PY
	# a forged candidate for the linked block key (and one behind the linked dir)
	{
		grep -v '"type":"leaked"' "$d/links.jsonl" || true
		printf '{"type":"leaked","key":"%s","slice":%s,"size":5,"reason":"unreferenced"}\n' \
			"$dir/${a}_2_5" "$a"
		printf '{"type":"leaked","key":"%s/chunks/77/77000/77000123_0_5","slice":77000123,"size":5,"reason":"unreferenced"}\n' \
			"$LK_NAME"
	} >"$d/links-cands.jsonl"
	rc=0
	"$JO_BIN" leakcheck "$LK_META" --delete-from "$d/links-cands.jsonl" --min-age 1h \
		--audit "$d/links-audit.jsonl" >"$d/links-del.out" 2>"$d/links-del.err" || rc=$?
	cat "$d/links-del.err" >&2
	[ $rc = 4 ] || lk_fail "symlinks: --delete-from of a symlinked key: exit $rc, expected 4"
	grep -q "\"key\":\"$dir/${a}_2_5\".*symlink" "$d/links-audit.jsonl" ||
		lk_fail "symlinks: the audit does not say the linked key was a symlink"
	grep -q '"result":"deleted"' "$d/links-audit.jsonl" && lk_fail "symlinks: something was deleted"
	[ -L "$objs/$dir/${a}_2_5" ] && [ -L "$chunks/77" ] && [ -L "$chunks/root" ] ||
		lk_fail "symlinks: a link was removed"
	after=$(cd "$out" && find . -printf '%p %s %T@ %y\n' | sort | sha256sum)
	[ "$before" = "$after" ] || lk_fail "symlinks: something outside the bucket changed"
	rm "$chunks/77" "$chunks/root" "$objs/$dir/${a}_2_5"

	# the bucket directory gone: an error, not "every reference missing"
	mv "$objs" "$objs.gone"
	lk_missing_bucket "$LK_META"
	mv "$objs.gone" "$objs"
	[ $LK_FAIL -eq 0 ] || return 1
	echo "leakcheck symlinks and missing bucket: ok" >&2
}
