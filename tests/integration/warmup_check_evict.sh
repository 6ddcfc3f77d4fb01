#!/bin/bash
# warmup_check_evict.sh: `jfsops warmup --check` and `--evict` against a real
# mount (Redis + SeaweedFS S3, juicefs, 256 KiB blocks). The oracle is the
# mount's cache directory itself, listed by this script (jfsops only ever
# talks to the mount: its control file, and stat of its cache files).
#
# 1. --check of some blocks after warming two files whole: exactly them
#    cached, per cache directory; --json per block; the mount's own answer
#    for the whole files (its control file, as `juicefs warmup --check`).
# 2. --evict of 3 blocks: the mount evicts whole files, so the 8 other cached
#    blocks of those files are read back: the cache holds exactly what it held
#    minus the 3 (listing), the read-back cost 8 GETs, --check agrees.
# 3. --evict-others drop: the whole file goes, the other file stays.
# 4. a block that a later write hides completely cannot be read back after
#    the mount's whole-file eviction: counted as lost, exit 4.
# 5. a mount caching in memory: --check gives the mount's whole-file answer
#    only (block_exact false); usage errors exit 2.
# run_all: asan
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/services.sh
. "$HERE/../lib/services.sh"
jo_setup
# shellcheck source=warmup_follow_lib.bash
. "$HERE/warmup_follow_lib.bash"
MOPTS=(--free-space-ratio 0 --max-readahead 0 --prefetch 0)
W() { "$JO_BIN" warmup "$META" "$@"; }
json_get() { # json_get FILE KEY: KEY of the last JSON line of FILE
	"$PY" -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]])" "$1" "$2"
}
gets() { stat_get "$1" juicefs_object_request_durations_histogram_seconds_GET_total; }
# settle DIR: wait until the cache directory stops changing (blocks are
# written to disk in the background)
settle() {
	local a b i
	a=$(cached_keys "$1" | md5sum)
	for i in $(seq 1 50); do
		sleep 0.2
		b=$(cached_keys "$1" | md5sum)
		[ "$a" = "$b" ] && return 0
		a=$b
	done
}

MP=$JO_T/mnt
jfs_mount "$META" "$MP"
head -c $((8 * BS)) /dev/urandom >"$MP/big.bin"
head -c $((2 * BS + 1000)) /dev/urandom >"$MP/small.bin"
head -c $((3 * BS)) /dev/urandom >"$MP/ow.bin"
sync
sleep 1.5 # the first write of ow.bin commits its slice
# overwrite block 1 of ow.bin whole: that block of the first slice is hidden
dd if=/dev/urandom of="$MP/ow.bin" bs=$BS seek=1 count=1 conv=notrunc status=none
sync
jfs_umount "$MP"

# ---------------------------------------------------------------- 1. check
jfs_mount "$META" "$MP" "${MOPTS[@]}"
C=${JO_MOUNT_KEY[$MP]}
printf 'big.bin\nsmall.bin\n' | W --mount "$MP" >/dev/null 2>"$JO_T/err" ||
	fail "warming failed: $(cat "$JO_T/err")"
settle "$C"
cached_keys "$C" >"$JO_T/before"
[ "$(wc -l <"$JO_T/before")" = 11 ] || fail "expected 11 cached blocks, the cache has: $(cat "$JO_T/before")"
R=$JO_T/r3.txt
printf 'big.bin %d 10\nbig.bin %d 1\nsmall.bin 100 10\n' $((2 * BS + 10)) $((5 * BS)) >"$R"
W --mount "$MP" --check -r "$R" >"$JO_T/check1.txt"
grep -q "^check: 3 ranges in 2 files -> 3 blocks ($((3 * BS)) bytes): 3 cached ($((3 * BS)) bytes, 100.0%)" \
	"$JO_T/check1.txt" || fail "check: $(cat "$JO_T/check1.txt")"
grep -q "^  $C/.*/	3 blocks	$((3 * BS)) bytes	100.0%" "$JO_T/check1.txt" ||
	fail "check locations: $(cat "$JO_T/check1.txt")"
grep -q "the mount's own check of the whole files .*: 2 files, $((10 * BS + 1000)) of $((10 * BS + 1000)) bytes (100.0%) cached" \
	"$JO_T/check1.txt" || fail "mount's check: $(cat "$JO_T/check1.txt")"
W --mount "$MP" --check --json -r "$R" >"$JO_T/check1.jsonl"
[ "$(grep -c '"type":"block".*"cached":true' "$JO_T/check1.jsonl")" = 3 ] ||
	fail "check --json: $(cat "$JO_T/check1.jsonl")"
# the blocks --check names are the ones the cache directory has
"$PY" - "$JO_T/check1.jsonl" "$JO_T/before" <<'EOF' || fail "--check keys are not in the cache"
import json, sys
keys = [json.loads(l)["key"] for l in open(sys.argv[1]) if '"block"' in l]
have = set(open(sys.argv[2]).read().split())
sys.exit(0 if all(k.split("/", 1)[1] in have for k in keys) else 1)
EOF
jo_log "check: 3 blocks cached, as the cache directory says"

# ---------------------------------------------------------------- 2. evict, keep others
W --dry-run --json -r "$R" | "$PY" -c "import json,sys
for l in sys.stdin:
    o=json.loads(l)
    if o.get('type')=='block': print(o['key'].split('/',1)[1])" | sort >"$JO_T/gone"
g0=$(gets "$MP")
W --mount "$MP" --evict --json -r "$R" >"$JO_T/evict2.jsonl" 2>"$JO_T/err" ||
	fail "evict failed: $(cat "$JO_T/err")"
g1=$(gets "$MP")
S2=$JO_T/evict2.jsonl
[ "$(json_get "$S2" blocks)" = 3 ] && [ "$(json_get "$S2" cached_blocks)" = 3 ] &&
	[ "$(json_get "$S2" still_cached)" = 0 ] && [ "$(json_get "$S2" other_blocks)" = 8 ] &&
	[ "$(json_get "$S2" rewarmed_blocks)" = 8 ] && [ "$(json_get "$S2" lost_blocks)" = 0 ] ||
	fail "evict summary: $(cat "$S2")"
# 8 blocks, plus at most one ranged GET per file: a read in a file's last
# 32 KiB makes the client read that whole tail, the end of the block before
[ $((g1 - g0)) -ge 8 ] && [ $((g1 - g0)) -le 10 ] ||
	fail "reading back the 8 other blocks took $((g1 - g0)) GETs"
settle "$C"
comm -23 "$JO_T/before" "$JO_T/gone" >"$JO_T/want"
cached_keys "$C" >"$JO_T/after"
diff "$JO_T/want" "$JO_T/after" || fail "the cache is not exactly what it was minus the 3 blocks"
W --mount "$MP" --check -r "$R" | grep -q ": 0 cached (0 bytes, 0.0%)" || fail "evicted blocks still reported cached"
printf 'big.bin\nsmall.bin\n' | W --mount "$MP" --check >"$JO_T/check2.txt"
grep -q "blocks ($((10 * BS + 1000)) bytes): 8 cached" "$JO_T/check2.txt" || fail "after evict: $(cat "$JO_T/check2.txt")"
jo_log "evict: exactly 3 blocks gone, the mount's whole-file eviction undone for 8 others ($((g1 - g0)) GETs)"

# ---------------------------------------------------------------- 3. evict, drop others
W --mount "$MP" --evict --evict-others drop -r <(echo "big.bin 0 10") 2>"$JO_T/evict3.txt" ||
	fail "evict drop failed: $(cat "$JO_T/evict3.txt")"
grep -q "evict: 1 blocks .* in 1 files, 1 of them were cached and are gone (0 still cached); the mount evicts whole files: 5 other cached blocks of them ($((5 * BS)) bytes) went too" \
	"$JO_T/evict3.txt" || fail "drop summary: $(cat "$JO_T/evict3.txt")"
settle "$C"
cached_keys "$C" >"$JO_T/after3"
grep -v "_$((BS))\$\|_1000\$" "$JO_T/after3" && fail "unexpected keys"
[ "$(wc -l <"$JO_T/after3")" = 2 ] || fail "after drop the cache should hold small.bin's 2 other blocks: $(cat "$JO_T/after3")"
jo_log "evict --evict-others drop: the whole file went, the other file stayed"

# ---------------------------------------------------------------- 4. a hidden block
"$JUICEFS" warmup --no-agent "$MP/ow.bin" >"$JO_T/jw.log" 2>&1 || fail "juicefs warmup failed"
settle "$C"
rc=0
W --mount "$MP" --evict --json -r <(echo "ow.bin 0 10") >"$JO_T/evict4.jsonl" 2>"$JO_T/err" || rc=$?
[ $rc = 4 ] || fail "evicting next to a hidden block: exit $rc, want 4: $(cat "$JO_T/err")"
[ "$(json_get "$JO_T/evict4.jsonl" lost_blocks)" = 1 ] || fail "hidden block: $(cat "$JO_T/evict4.jsonl")"
[ "$(json_get "$JO_T/evict4.jsonl" rewarmed_blocks)" = 2 ] || fail "hidden block: $(cat "$JO_T/evict4.jsonl")"
jo_log "a block no byte of which the file shows: lost after the mount's whole-file eviction (exit 4)"
jfs_umount "$MP"

# ---------------------------------------------------------------- 5. memory cache, usage
mkdir -p "$JO_T/mnt-m"
jfs_mount "$META" "$JO_T/mnt-m" --cache-dir memory --free-space-ratio 0
echo "big.bin" | W --mount "$JO_T/mnt-m" >/dev/null 2>&1 || fail "warming the memory mount failed"
W --mount "$JO_T/mnt-m" --check --json -r "$R" >"$JO_T/check5.jsonl" 2>"$JO_T/err5" ||
	fail "check on a memory cache failed: $(cat "$JO_T/err5")"
grep -q "keeps its block cache in memory" "$JO_T/err5" || fail "no memory-cache warning: $(cat "$JO_T/err5")"
[ "$(json_get "$JO_T/check5.jsonl" block_exact)" = False ] || fail "memory: $(cat "$JO_T/check5.jsonl")"
[ "$(json_get "$JO_T/check5.jsonl" mount_cached_bytes)" -gt 0 ] || fail "memory: $(cat "$JO_T/check5.jsonl")"
jfs_umount "$JO_T/mnt-m"
for bad in "--check --dry-run" "--evict --check" "--evict-others maybe --evict" "--evict-done" \
	"--control x" "--ahead 3" "--follow" "--state s --check" "--evict-others keep --check"; do
	rc=0
	# shellcheck disable=SC2086
	W --mount "$MP" $bad </dev/null >/dev/null 2>"$JO_T/err" || rc=$?
	[ $rc = 2 ] || fail "'$bad': exit $rc, want 2"
	[ "$(wc -l <"$JO_T/err")" = 1 ] || fail "'$bad': not one error line: $(cat "$JO_T/err")"
done
rc=0
"$JO_BIN" warmup --done 3 2>/dev/null || rc=$?
[ $rc = 2 ] || fail "--done without --control: exit $rc"
rc=0
"$JO_BIN" warmup --control "$JO_T/nope.sock" --status 3 2>/dev/null || rc=$?
[ $rc = 5 ] || fail "--status without a pipeline: exit $rc, want 5"
echo "PASS warmup_check_evict"
