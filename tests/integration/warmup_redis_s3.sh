#!/bin/bash
# warmup_redis_s3.sh: `jfsops warmup --mount` against a real volume (Redis +
# SeaweedFS S3, 1 MiB blocks) mounted by the real juicefs client.
#
# 1. Files are written through a mount (one crosses a chunk boundary, one has
#    an overwrite, one sits in a subdirectory); `juicefs dump` gives the slices.
# 2. --dry-run lists exactly the blocks that an independent oracle
#    (warmup_oracle.py, spec §8.2 over the dump) computes, for ranges in all
#    four input forms; bad input gives exit 8 / exit 2.
# 3. Exact phase: a fresh mount with an empty cache and --prefetch 0; warmup
#    of ranges whose blocks start inside the file: the mount's object GETs
#    equal the distinct blocks (and their bytes), and the cache directory
#    holds exactly those blocks. A remount on the same cache directory reads
#    the ranges (checked against the local copies) with zero object GETs.
# 4. Prefetch phase: default --prefetch 1, ranges whose block starts at file
#    offset 0 or is hidden by an overwrite: all warmed, cache holds exactly
#    them, remount reads them with zero GETs.
# 5. `juicefs warmup` of the same files on a fresh cache, for comparison.
#
# Env: JFSOPS_BIN (a jfsops with the warmup command; default build/jfsops),
# JO_PORT_BASE (default 9640: metrics ports 9670..), JO_WARMUP_REDIS_PORT
# (JO_PORT_BASE), JO_WARMUP_SEAWEED_BASE (JO_PORT_BASE+10).
export JO_PORT_BASE=${JO_PORT_BASE:-9640}
. "$(dirname "$0")/lib/init.sh"
PY=$JO_VENV/bin/python
BS=$((1 << 20))

# shellcheck source=warmup_lib.bash
. "$here/warmup_lib.bash"

# remount_reads_cached CACHE RANGES PHASE: mount on the warmed cache CACHE
# (no prefetch, no readahead) and read exactly RANGES: the bytes are the
# local copy's and not one GET reaches the object store.
remount_reads_cached() {
	local g0 g1
	mount_at "$MP" "$1" --prefetch 0 --max-readahead 0
	sleep 2 # the client indexes its cache directory at start
	g0=$(gets "$MP")
	"$PY" "$here/warmup_read.py" "$MP" "$L" "$2" || fail "$3: bytes read through the mount differ"
	sleep 1
	g1=$(gets "$MP")
	[ $((g1 - g0)) = 0 ] || fail "$3: remount fetched $((g1 - g0)) objects for warmed ranges"
	jo_log "$3: remount read all ranges with 0 GETs"
	jfs_umount "$MP"
}

# ---------------------------------------------------------------- data
L=$JO_T/local
mkdir -p "$L/sub"
head -c $((66 << 20)) /dev/urandom >"$L/big.bin"
head -c $((3 << 20 | 512 << 10)) /dev/urandom >"$L/small.bin"
head -c $((4 << 20)) /dev/urandom >"$L/ow.bin"
head -c $((2 << 20)) /dev/urandom >"$L/sub/deep.bin"
head -c $((512 << 10)) /dev/urandom >"$L/patch"
MP=$JO_T/mnt
mount_at "$MP" "$JO_T/cache-w"
cp "$L/big.bin" "$L/small.bin" "$L/ow.bin" "$MP/"
mkdir -p "$MP/sub"
cp "$L/sub/deep.bin" "$MP/sub/"
sync
sleep 1.5 # let the first write of ow.bin commit its slice
# overwrite ow.bin [1M, 1.5M): block 1 of its first slice loses its first byte
dd if="$L/patch" of="$MP/ow.bin" bs=512K seek=2 conv=notrunc status=none
dd if="$L/patch" of="$L/ow.bin" bs=512K seek=2 conv=notrunc status=none
sync
jfs_umount "$MP"
jfs_dump "$META" "$JO_T/dump.json"

W() { "$JO_BIN" warmup "$@"; }

# ---------------------------------------------------------------- dry run vs oracle
# Phase-1 ranges: every block's first byte is inside the file, not at offset 0,
# and not in the last 32 KiB of a file (where the client reads that tail too).
R1=$JO_T/r1.txt # canonical "PATH OFF LEN" for the oracle and the reader
cat >"$R1" <<EOF
big.bin 5243000 100
big.bin 5243050 300
big.bin 2621440 102400
big.bin 66060298 2097152
small.bin 1048577 1
sub/deep.bin 1572864 4096
EOF
# the same ranges in the four input forms
IN1=$JO_T/in1.txt
cat >"$IN1" <<EOF
# jfsops lance --format jsonl
{"type":"range","file":"big.bin","offset":5243000,"length":100,"kind":"data"}
{"type":"range","file":"big.bin","offset":5243050,"length":300,"kind":"data"}
{"type":"summary","ranges":2}
file,offset,length
big.bin,2621440,102400
big.bin [66060298-68157450]
small.bin 1048577 1

sub/deep.bin,1572864,4096
EOF
"$PY" "$here/warmup_oracle.py" "$JO_T/dump.json" $BS wvol "$R1" >"$JO_T/oracle1.jsonl"
W "$META" --ranges "$IN1" --dry-run --json >"$JO_T/dry1.jsonl" || fail "dry run exit $?"
jq() { "$PY" -c "import json,sys
for l in sys.stdin:
    o=json.loads(l)
    if o.get('type','block')=='block': print($1)"; }
jq "o['key'], o['size']" <"$JO_T/oracle1.jsonl" | sort >"$JO_T/want1"
jq "o['key'], o['size']" <"$JO_T/dry1.jsonl" | sort >"$JO_T/got1"
diff "$JO_T/want1" "$JO_T/got1" || fail "dry-run blocks differ from the oracle"
NB1=$(wc -l <"$JO_T/want1")
SUM1=$(jq "o['size']" <"$JO_T/oracle1.jsonl" | awk '{s+=$1} END {print s}')
[ "$NB1" -ge 7 ] || fail "expected at least 7 blocks, oracle says $NB1"
# the test's premise: every phase-1 block is read at its first byte
kinds=$(jq "o['kind']" <"$JO_T/oracle1.jsonl" | sort -u | tr '\n' ' ')
[ "$kinds" = "start " ] || fail "phase-1 ranges need blocks of kind 'start', got: $kinds"
grep -q "\"type\":\"summary\".*\"files\":3,\"ranges\":6,.*\"blocks\":$NB1,\"bytes\":$SUM1," \
	"$JO_T/dry1.jsonl" || { cat "$JO_T/dry1.jsonl" >&2; fail "bad dry-run summary"; }
# text form: one "KEY<TAB>SIZE" per block, then the total
W "$META" --ranges "$IN1" --list >"$JO_T/list1.txt"
[ "$(grep -c $'\t' "$JO_T/list1.txt")" = "$NB1" ] || fail "--list line count"
grep -q "^total: files 3, ranges 6 .*blocks $NB1 ($SUM1 bytes)" "$JO_T/list1.txt" ||
	fail "--list total: $(tail -1 "$JO_T/list1.txt")"
jo_log "dry run: $NB1 blocks ($SUM1 bytes) match the oracle"

# bad input
rc=0
printf 'big.bin 0 1\nnope/missing.bin 0 10\n' | W "$META" --dry-run >/dev/null 2>"$JO_T/err" || rc=$?
[ $rc = 8 ] || fail "missing path: exit $rc, want 8"
grep -q "line 2: no such file 'nope/missing.bin'" "$JO_T/err" || fail "missing path message: $(cat "$JO_T/err")"
rc=0
printf 'big.bin 0 1\nbig.bin [10-5]\n' | W "$META" --dry-run >/dev/null 2>"$JO_T/err" || rc=$?
[ $rc = 2 ] || fail "malformed line: exit $rc, want 2"
grep -q "line 2: range '10-5' ends before it starts" "$JO_T/err" || fail "malformed message: $(cat "$JO_T/err")"
rc=0
W "$META" --ranges "$IN1" --mount "$JO_T" >/dev/null 2>"$JO_T/err" || rc=$?
[ $rc = 8 ] || fail "not a mount: exit $rc, want 8"
grep -q "not a JuiceFS mount point" "$JO_T/err" || fail "not-a-mount message: $(cat "$JO_T/err")"

# ---------------------------------------------------------------- phase 1: exact
C1=$JO_T/cache-1
mount_at "$MP" "$C1" --prefetch 0
g0=$(gets "$MP")
b0=$(getbytes "$MP")
W "$META" --ranges "$IN1" --mount "$MP" --threads 4 --json >"$JO_T/warm1.jsonl" ||
	{ cat "$JO_T/warm1.jsonl" >&2; fail "warmup exit $?"; }
sleep 1
g1=$(gets "$MP")
b1=$(getbytes "$MP")
jo_log "phase 1: mount did $((g1 - g0)) GETs ($((b1 - b0)) bytes) for $NB1 blocks ($SUM1 bytes)"
[ $((g1 - g0)) = "$NB1" ] || fail "GETs $((g1 - g0)) != blocks $NB1"
[ $((b1 - b0)) = "$SUM1" ] || fail "GET bytes $((b1 - b0)) != $SUM1"
grep -q "\"warmed\":$NB1,\"warmed_bytes\":$SUM1,\"failed\":0" "$JO_T/warm1.jsonl" ||
	{ cat "$JO_T/warm1.jsonl" >&2; fail "bad warmup summary"; }
grep -q "\"mount_gets\":$NB1" "$JO_T/warm1.jsonl" || fail "summary mount_gets"
# a block whose first byte is hidden by an overwrite cannot be cached through
# a mount that does not prefetch: reported as failed (exit 4), nothing read
rc=0
echo "ow.bin 1663200 1000" | W "$META" --mount "$MP" >/dev/null 2>"$JO_T/err" || rc=$?
[ $rc = 4 ] || fail "unwarmable block: exit $rc, want 4: $(cat "$JO_T/err")"
grep -q "cannot warm block 'wvol/chunks/.*_1_1048576'.*--prefetch 0" "$JO_T/err" ||
	fail "unwarmable block message: $(cat "$JO_T/err")"
grep -q "warmed 0 (0 bytes), failed 1; the mount did 0 object GETs" "$JO_T/err" ||
	fail "unwarmable block summary: $(cat "$JO_T/err")"
jq "o['key'][len('wvol/'):]" <"$JO_T/oracle1.jsonl" | sort >"$JO_T/wantkeys1"
jfs_umount "$MP"
cached_keys "$C1" >"$JO_T/cached1"
diff "$JO_T/wantkeys1" "$JO_T/cached1" || fail "cache holds other blocks than the wanted ones"

# remount on the same cache: reading exactly the ranges fetches nothing
remount_reads_cached "$C1" "$R1" "phase 1"

# ---------------------------------------------------------------- phase 2: prefetch
R2=$JO_T/r2.txt
cat >"$R2" <<EOF
small.bin 10 100
ow.bin 1663200 1000
ow.bin 1048676 100
EOF
"$PY" "$here/warmup_oracle.py" "$JO_T/dump.json" $BS wvol "$R2" >"$JO_T/oracle2.jsonl"
kinds=$(jq "o['kind']" <"$JO_T/oracle2.jsonl" | sort -u | tr '\n' ' ')
[ "$kinds" = "partial start zero " ] || fail "phase-2 ranges should give partial, start and zero blocks: $kinds"
W "$META" --ranges "$R2" --dry-run --json >"$JO_T/dry2.jsonl"
jq "o['key'], o['size']" <"$JO_T/oracle2.jsonl" | sort >"$JO_T/want2"
jq "o['key'], o['size']" <"$JO_T/dry2.jsonl" | sort >"$JO_T/got2"
diff "$JO_T/want2" "$JO_T/got2" || fail "phase-2 dry-run blocks differ from the oracle"
NB2=$(wc -l <"$JO_T/want2")
SUM2=$(jq "o['size']" <"$JO_T/oracle2.jsonl" | awk '{s+=$1} END {print s}')
C2=$JO_T/cache-2
mount_at "$MP" "$C2"
g0=$(gets "$MP")
b0=$(getbytes "$MP")
W "$META" --ranges "$R2" --mount "$MP" --json >"$JO_T/warm2.jsonl" ||
	{ cat "$JO_T/warm2.jsonl" >&2; fail "warmup (prefetch) exit $?"; }
sleep 1
g1=$(gets "$MP")
b1=$(getbytes "$MP")
summ() { "$PY" -c "import json,sys
print([json.loads(l) for l in open(sys.argv[1])][-1][sys.argv[2]])" "$JO_T/warm2.jsonl" "$1"; }
waits=$(summ prefetch_waits)
seen=$(summ prefetch_cache_seen)
jo_log "phase 2: $NB2 blocks ($SUM2 bytes), $waits via the prefetcher ($seen seen arriving in the cache): $((g1 - g0)) GETs ($((b1 - b0)) bytes)"
[ "$waits" = 2 ] || fail "expected 2 blocks read through the prefetcher, got $waits"
# a prefetched block costs a one-byte ranged GET plus the whole block; the
# wait watches the disk cache, so nothing is read twice. Only a block not
# seen in the cache within the watch is read again (a second one-byte GET, or
# a second full GET when that read falls between the end of the prefetch
# and the client publishing the block).
extra=$((waits - seen))
[ $((g1 - g0)) -ge $((NB2 + waits)) ] && [ $((g1 - g0)) -le $((NB2 + waits + 2 * extra)) ] ||
	fail "GETs $((g1 - g0)) outside [$((NB2 + waits)), $((NB2 + waits + 2 * extra))]"
[ $((b1 - b0)) -ge $((SUM2 + waits)) ] && [ $((b1 - b0)) -le $((SUM2 + waits + extra * (BS + 1))) ] ||
	fail "GET bytes $((b1 - b0)) outside [$((SUM2 + waits)), $((SUM2 + waits + extra * (BS + 1)))]"
jq "o['key'][len('wvol/'):]" <"$JO_T/oracle2.jsonl" | sort >"$JO_T/wantkeys2"
jfs_umount "$MP"
cached_keys "$C2" >"$JO_T/cached2"
diff "$JO_T/wantkeys2" "$JO_T/cached2" || fail "phase-2 cache holds other blocks than the wanted ones"
remount_reads_cached "$C2" "$R2" "phase 2"

# ---------------------------------------------------------------- juicefs warmup
C3=$JO_T/cache-3
mount_at "$MP" "$C3"
b0=$(getbytes "$MP")
"$JUICEFS" warmup --no-agent "$MP/big.bin" "$MP/small.bin" "$MP/ow.bin" "$MP/sub/deep.bin" \
	>"$JO_T/jwarm.log" 2>&1 || { cat "$JO_T/jwarm.log" >&2; fail "juicefs warmup failed"; }
sleep 1
b1=$(getbytes "$MP")
theirs=$((b1 - b0))
ours=$((SUM1 + SUM2))
jo_log "juicefs warmup of the same files fetched $theirs bytes; jfsops warmup $ours bytes" \
	"($(awk -v a=$ours -v b=$theirs 'BEGIN { printf "%.1f%%", 100 * a / b }'))"
[ "$ours" -lt "$theirs" ] || fail "jfsops warmed more than juicefs warmup"
jfs_umount "$MP"
echo "PASS warmup_redis_s3"
