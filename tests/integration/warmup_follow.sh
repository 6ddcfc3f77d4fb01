#!/bin/bash
# warmup_follow.sh: `jfsops warmup --follow`, the look-ahead pipeline, against
# a real mount (Redis + SeaweedFS S3, juicefs mount, 256 KiB blocks) and a
# pylance dataset of 50 fragments written through the mount. The consumer is
# contrib/python/examples/lance_sampler.py (a PyTorch-style sampler loop,
# one fragment per batch, no torch) using the contrib/python client.
#
# 1. A consumer at a fixed pace (0.25 s a batch, not waiting for readiness),
#    --ahead 2 --evict-done: its reads of batch N >= 2 come from the cache
#    (the mount's own .stats: every miss while it reads is one of the
#    pipeline's one-byte reads); the pipeline's admit/done lines never show
#    more than 2 batches beyond the consumer; the mount's cache never holds
#    more than 2 consecutive batches need (their blocks from --dry-run, plus
#    the cache's 4 KiB per block and one block of slack); a passed batch's
#    blocks are gone (--check while the run goes on, and all at the end).
# 2. The pipeline killed (SIGKILL) at batch 12 of 30: the client starts a new
#    one, which begins at the consumer's position and warms nothing before it.
# 3. A consumer faster than the pipeline (the mount's downloads limited to 16
#    Mbit/s, a done every 30 ms, nothing waited for): still never more than 2
#    batches beyond it, never more cache than 2 batches need (plus the reads
#    in flight), most batches skipped unread, everything evicted at the end.
# 4. Control by FIFO (status lines on stdout), status answered at once while
#    the stream has no writer yet, SIGTERM / SIGINT while waiting: 143 / 130.
# 5. --state: a pipeline killed after done 3 of 10 and started again on the
#    same stream resumes after batch 3 (the passed batches are not warmed).
# 6. Eight batches in one file, one block each, --evict-done: the mount evicts
#    the whole file, so the window's blocks come back (their batches turn
#    unready, then ready again); a consumer that waits for readiness reads
#    every batch from the cache; nothing of the file stays cached.
#
# Env: JFSOPS_BIN, JO_PORT_BASE (Redis BASE, SeaweedFS BASE+10..13, juicefs
# metrics BASE+30..50), JO_FOLLOW_REDIS_PORT, JO_FOLLOW_SEAWEED_BASE.
# run_all: asan
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/services.sh
. "$HERE/../lib/services.sh"
jo_setup
# shellcheck source=warmup_follow_lib.bash
. "$HERE/warmup_follow_lib.bash"
"$PY" -c "import lance" 2>/dev/null || fail "pylance is not installed in $JO_VENV"
CHK=("$PY" "$HERE/warmup_follow_check.py")
EX=$JO_REPO/contrib/python/examples/lance_sampler.py
# the cache must not shrink because the test machine's disk is nearly full;
# no readahead: the consumer reads what the ranges say and no more
MOPTS=(--free-space-ratio 0 --max-readahead 0)
# nlines FILE: lines in FILE (0 when it does not exist yet)
nlines() {
	if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi
}

# ---------------------------------------------------------------- data
MP=$JO_T/mnt
jfs_mount "$META" "$MP"
"$PY" - "$MP/ds" <<'EOF'
import os, sys
import pyarrow as pa, lance
n, per = 50, 600
rows = n * per
t = pa.table({
    "id": pa.array(range(rows), pa.int64()),
    "emb": pa.FixedSizeListArray.from_arrays(
        pa.array([float(x % 251) for x in range(rows * 128)], pa.float32()), 128),
    "payload": pa.array([os.urandom(1024) for _ in range(rows)], pa.binary()),
})
ds = lance.write_dataset(t, sys.argv[1], max_rows_per_file=per, max_rows_per_group=per)
assert len(ds.get_fragments()) == n
EOF
jfs_umount "$MP"

# ---------------------------------------------------------------- 1. paced consumer
jfs_mount "$META" "$MP" "${MOPTS[@]}"
S=$(cache_sampler "$MP" "$JO_T/cache1.txt")
JO_KILL_PIDS+=("$S")
"$PY" "$EX" --meta "$META" --mount "$MP" --dataset /ds --columns id,emb --jfsops "$JO_BIN" \
	--ahead 2 --evict-done --pace 0.25 --control "$JO_T/ctl1.sock" \
	--events "$JO_T/events1.jsonl" --out "$JO_T/batches1.jsonl" --plan-out "$JO_T/plan.jsonl" \
	>"$JO_T/ex1.log" 2>&1 &
EXP=$!
JO_KILL_PIDS+=("$EXP") # stopped by jo_cleanup if the script dies first
# while it runs: once batch 30 was read, batch 10's data blocks must be gone
for i in $(seq 1 600); do
	[ "$(nlines "$JO_T/batches1.jsonl")" -ge 31 ] && break
	kill -0 $EXP 2>/dev/null || break
	sleep 0.1
done
"${CHK[@]}" blocks --data-only "$JO_T/plan.jsonl" 10 >"$JO_T/b10.txt"
[ -s "$JO_T/b10.txt" ] || fail "no ranges for batch 10"
"$JO_BIN" warmup "$META" --prefix /ds --mount "$MP" --check --json -r "$JO_T/b10.txt" \
	>"$JO_T/check10.jsonl" || fail "--check of batch 10 failed"
rc=0
wait $EXP || rc=$?
kill "$S" 2>/dev/null || true
[ $rc = 0 ] || { tail -20 "$JO_T/ex1.log" >&2; fail "the paced consumer failed (exit $rc)"; }
grep -q '"type": "summary".*"pipeline_exit": 0' "$JO_T/batches1.jsonl" ||
	fail "pipeline did not end well: $(tail -1 "$JO_T/batches1.jsonl")"
[ "$(grep -c '"rows": 600' "$JO_T/batches1.jsonl")" = 50 ] || fail "not 50 batches of 600 rows"
"${CHK[@]}" hits "$JO_T/batches1.jsonl" 2
"${CHK[@]}" window "$JO_T/events1.jsonl" 2
grep -q '"type": "summary".*"ready": 50' "$JO_T/events1.jsonl" || fail "not 50 batches ready"
# passed batch 10 while the run went on: none of its blocks cached
"$PY" - "$JO_T/check10.jsonl" <<'EOF' || fail "batch 10's blocks are still cached"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
print("check of passed batch 10 during the run: %d blocks, %d cached (block_exact %s)"
      % (s["blocks"], s["cached_blocks"], s["block_exact"]), file=sys.stderr)
sys.exit(0 if s["block_exact"] and s["blocks"] > 0 and s["cached_blocks"] == 0 else 1)
EOF
# the cache never held more than two batches need
"${CHK[@]}" bound "$JO_T/plan.jsonl" "$JO_BIN" "$META" /ds 2 "$JO_T/bound2"
read -r need nblk _ <"$JO_T/bound2"
peak=$(sort -n "$JO_T/cache1.txt" | tail -1)
limit=$((need + (nblk + 2) * 4096 + BS))
jo_log "phase 1: peak cache $peak bytes; 2 batches need $need bytes ($nblk blocks); limit $limit"
[ "$peak" -gt 0 ] && [ "$peak" -le "$limit" ] || fail "cache peak $peak over $limit"
# at the end every batch passed: nothing of them is cached
"${CHK[@]}" blocks "$JO_T/plan.jsonl" $(seq 0 49) >"$JO_T/all.txt"
"$JO_BIN" warmup "$META" --prefix /ds --mount "$MP" --check -r "$JO_T/all.txt" >"$JO_T/checkall.txt"
grep -q ": 0 cached (0 bytes, 0.0%)" "$JO_T/checkall.txt" ||
	fail "blocks of passed batches are cached: $(cat "$JO_T/checkall.txt")"
jo_log "phase 1: $(head -1 "$JO_T/checkall.txt")"
# the same check on a consumer nobody warms for fails (a fresh mount: the
# kernel's page cache of the last one would serve the reads without a miss)
jfs_umount "$MP"
jfs_mount "$META" "$MP" "${MOPTS[@]}"
"$PY" "$EX" --meta "$META" --mount "$MP" --dataset /ds --columns id,emb --jfsops "$JO_BIN" \
	--no-warmup --limit 6 --out "$JO_T/batches0.jsonl" >"$JO_T/ex0.log" 2>&1 ||
	fail "the unwarmed consumer failed: $(tail -5 "$JO_T/ex0.log")"
if "${CHK[@]}" hits "$JO_T/batches0.jsonl" 2 2>"$JO_T/hits0.err"; then
	fail "the hits check passed for a consumer nobody warmed for"
fi
"$PY" - "$JO_T/batches0.jsonl" <<'EOF' || fail "the unwarmed consumer did not miss"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"rows"' in l]
sys.exit(0 if all(r["miss_bytes"] - r["misses"] > 4096 for r in recs) else 1)
EOF
jo_log "phase 1: without the pipeline every read misses and the hits check fails, as it should"
jfs_umount "$MP"
jfs_mount "$META" "$MP" "${MOPTS[@]}"

# ---------------------------------------------------------------- 2. restart
"$PY" "$EX" --meta "$META" --mount "$MP" --dataset /ds --columns id,emb --jfsops "$JO_BIN" \
	--ahead 2 --evict-done --pace 0.2 --limit 30 --control "$JO_T/ctl2.sock" \
	--pid-file "$JO_T/pipeline.pid" --events "$JO_T/events2.jsonl" \
	--out "$JO_T/batches2.jsonl" >"$JO_T/ex2.log" 2>&1 &
EXP=$!
JO_KILL_PIDS+=("$EXP") # stopped by jo_cleanup if the script dies first
for i in $(seq 1 600); do
	[ "$(nlines "$JO_T/batches2.jsonl")" -ge 12 ] && break
	kill -0 $EXP 2>/dev/null || fail "consumer 2 ended early: $(tail -5 "$JO_T/ex2.log")"
	sleep 0.05
done
kill -KILL "$(cat "$JO_T/pipeline.pid")"
jo_log "phase 2: killed the pipeline (pid $(cat "$JO_T/pipeline.pid")) after batch 12"
rc=0
wait $EXP || rc=$?
[ $rc = 0 ] || { tail -20 "$JO_T/ex2.log" >&2; fail "consumer 2 failed (exit $rc)"; }
grep -q '"restarts": 1' "$JO_T/batches2.jsonl" || fail "no restart: $(tail -1 "$JO_T/batches2.jsonl")"
[ "$(grep -c '"rows": 600' "$JO_T/batches2.jsonl")" = 30 ] || fail "not 30 batches read"
"${CHK[@]}" restart "$JO_T/events2.jsonl"
"${CHK[@]}" window "$JO_T/events2.jsonl" 2
jfs_umount "$MP"

# ---------------------------------------------------------------- 3. fast consumer
jfs_mount "$META" "$MP" "${MOPTS[@]}" --download-limit 16
S=$(cache_sampler "$MP" "$JO_T/cache3.txt")
JO_KILL_PIDS+=("$S")
PYTHONPATH=$HERE "$PY" - "$JO_REPO/contrib/python" "$JO_T/plan.jsonl" "$META" "$MP" "$JO_T/ctl3.sock" "$JO_BIN" \
	"$JO_T/events3.jsonl" <<'EOF' || fail "fast consumer failed"
import json, sys, time
sys.path.insert(0, sys.argv[1])
from jfsops_warmup import Pipeline
from warmup_follow_check import close_and_log
plan = [json.loads(l) for l in open(sys.argv[2])]
p = Pipeline(sys.argv[3], sys.argv[4], sys.argv[5], ahead=2, prefix="/ds", jfsops=sys.argv[6],
             evict_done=True, threads=2)
p.feed((b["batch"], [tuple(r) for r in b["ranges"]]) for b in plan)
for b in plan:
    time.sleep(0.03)          # faster than the pipeline can warm a batch
    p.done(b["batch"])
sys.exit(close_and_log(p, 120, sys.argv[7]))
EOF
sleep 0.5
kill "$S" 2>/dev/null || true
"${CHK[@]}" window "$JO_T/events3.jsonl" 2
peak=$(sort -n "$JO_T/cache3.txt" | tail -1)
end=$(stat_get "$MP" juicefs_blockcache_bytes)
# reads in flight (2 threads, 2 queued each) may finish after their batch passed
limit=$((need + (nblk + 4 + 2) * 4096 + 4 * BS))
"$PY" - "$JO_T/events3.jsonl" "$JO_T/bound2" <<'EOF' || fail "the fast consumer's pipeline warmed passed batches"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
s = [e for e in ev if e.get("type") == "summary"][-1]
total = int(open(sys.argv[2]).read().split()[2])
print("phase 3: %d batches, %d skipped, %d blocks warmed of %d in all batches, %d cancelled, "
      "max_ahead %d" % (s["batches"], s["skipped"], s["warmed"], total, s["cancelled"],
                        s["max_ahead"]), file=sys.stderr)
sys.exit(0 if s["warmed"] * 2 < total and s["skipped"] + s["cancelled"] > 0 else 1)
EOF
jo_log "phase 3: peak cache $peak bytes (limit $limit), $end at the end"
[ "$peak" -le "$limit" ] || fail "fast consumer: cache peak $peak over $limit"
[ "$end" -le $((2 * 4096)) ] || fail "fast consumer: $end bytes still cached at the end"
jfs_umount "$MP"

# ---------------------------------------------------------------- 4. FIFO control, signals
jfs_mount "$META" "$MP" "${MOPTS[@]}"
"${CHK[@]}" blocks "$JO_T/plan.jsonl" 0 >"$JO_T/b0.txt"
"${CHK[@]}" blocks "$JO_T/plan.jsonl" 1 >"$JO_T/b1.txt"
mkfifo "$JO_T/stream4" "$JO_T/ctl4"
"$JO_BIN" warmup "$META" --prefix /ds --mount "$MP" --follow --control "$JO_T/ctl4" \
	--ranges "$JO_T/stream4" >"$JO_T/out4.jsonl" 2>"$JO_T/err4" &
FP=$!
JO_KILL_PIDS+=("$FP") # stopped by jo_cleanup if the script dies first
exec 6>"$JO_T/stream4"
{ cat "$JO_T/b0.txt"; echo "# batch f0"; cat "$JO_T/b1.txt"; echo "# batch f1"; } >&6
# both batches ready (f0 may finish after f1: its last block can still be in
# flight when f1, which shares one, is done)
for i in $(seq 1 100); do
	grep -q '"type":"batch","batch":"f0"' "$JO_T/out4.jsonl" &&
		grep -q '"type":"batch","batch":"f1"' "$JO_T/out4.jsonl" && break
	sleep 0.1
done
echo "status f0" >"$JO_T/ctl4"
echo "done f0" >"$JO_T/ctl4"
for i in $(seq 1 100); do grep -q '"type":"done","batch":"f0"' "$JO_T/out4.jsonl" && break; sleep 0.1; done
grep -q '"type":"status","batch":"f0","state":"ready","ready":true' "$JO_T/out4.jsonl" ||
	fail "FIFO status line missing: $(cat "$JO_T/out4.jsonl")"
"$JO_BIN" warmup --control "$JO_T/ctl4" --done f1 || fail "--done through a FIFO failed"
rc=0
"$JO_BIN" warmup --control "$JO_T/ctl4" --status f1 2>"$JO_T/err" || rc=$?
[ $rc = 9 ] || fail "--status on a FIFO: exit $rc, want 9"
for i in $(seq 1 100); do grep -q '"type":"done","batch":"f1"' "$JO_T/out4.jsonl" && break; sleep 0.1; done
kill -TERM $FP
rc=0
wait $FP || rc=$?
exec 6>&-
[ $rc = 143 ] || fail "SIGTERM while following: exit $rc, want 143: $(cat "$JO_T/err4")"
tail -1 "$JO_T/out4.jsonl" | grep -q '"type":"summary"' || fail "no summary after SIGTERM"
jo_log "phase 4: FIFO control, status and done lines, SIGTERM -> 143"
# a socket answers at once while the stream has no writer yet
mkfifo "$JO_T/stream5"
"$JO_BIN" warmup "$META" --prefix /ds --mount "$MP" --follow --control "$JO_T/ctl5.sock" \
	--ranges "$JO_T/stream5" >"$JO_T/out5.jsonl" 2>"$JO_T/err5" &
FP=$!
JO_KILL_PIDS+=("$FP") # stopped by jo_cleanup if the script dies first
for i in $(seq 1 100); do [ -S "$JO_T/ctl5.sock" ] && break; sleep 0.05; done
t0=$(date +%s%N)
rc=0
"$JO_BIN" warmup --control "$JO_T/ctl5.sock" --status x0 >"$JO_T/st5" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 8 ] || fail "--status of an unknown batch: exit $rc, want 8: $(cat "$JO_T/st5")"
grep -q '"state":"unknown"' "$JO_T/st5" || fail "status: $(cat "$JO_T/st5")"
[ $ms -lt 2000 ] || fail "status took $ms ms"
kill -INT $FP
rc=0
wait $FP || rc=$?
[ $rc = 130 ] || fail "SIGINT while waiting for the stream: exit $rc, want 130: $(cat "$JO_T/err5")"
[ ! -e "$JO_T/ctl5.sock" ] || fail "the control socket was left behind"
jo_log "phase 4: status answered in $ms ms while waiting; SIGINT -> 130, socket removed"

# ---------------------------------------------------------------- 5. --state
# consume_batches FROM TO: as a consumer of the pipeline at ctl6.sock, wait
# for each batch sFROM..sTO to be ready (up to 5 s) and say it is done.
consume_batches() {
	local i k
	for i in $(seq "$1" "$2"); do
		for k in $(seq 1 100); do
			"$JO_BIN" warmup --control "$JO_T/ctl6.sock" --status "s$i" >/dev/null && break
			sleep 0.05
		done
		"$JO_BIN" warmup --control "$JO_T/ctl6.sock" --done "s$i" >/dev/null
	done
}
: >"$JO_T/stream6"
for i in $(seq 0 9); do
	"${CHK[@]}" blocks "$JO_T/plan.jsonl" "$i" >>"$JO_T/stream6"
	echo "# batch s$i" >>"$JO_T/stream6"
done
F6=("$JO_BIN" warmup "$META" --prefix /ds --mount "$MP" --follow --control "$JO_T/ctl6.sock"
	--ranges "$JO_T/stream6" --state "$JO_T/state6.json" --evict-done)
"${F6[@]}" >"$JO_T/out6a.jsonl" 2>"$JO_T/err6a" &
FP=$!
JO_KILL_PIDS+=("$FP") # stopped by jo_cleanup if the script dies first
for i in $(seq 1 100); do [ -S "$JO_T/ctl6.sock" ] && break; sleep 0.05; done
consume_batches 0 3
grep -q '"done":"s3","done_index":3' "$JO_T/state6.json" || fail "state: $(cat "$JO_T/state6.json")"
kill -KILL $FP
{ wait $FP; } 2>/dev/null || true
"${F6[@]}" >"$JO_T/out6b.jsonl" 2>"$JO_T/err6b" &
FP=$!
JO_KILL_PIDS+=("$FP") # stopped by jo_cleanup if the script dies first
for i in $(seq 1 100); do grep -q '"type":"admit"' "$JO_T/out6b.jsonl" && break; sleep 0.05; done
first=$(grep -m1 '"type":"admit"' "$JO_T/out6b.jsonl" | sed 's/.*"batch":"\([^"]*\)".*/\1/')
[ "$first" = s4 ] || fail "the resumed pipeline began at '$first', not s4: $(head -5 "$JO_T/out6b.jsonl")"
! grep -q '"type":"admit","batch":"s[0-3]"' "$JO_T/out6b.jsonl" ||
	fail "the resumed pipeline warmed a passed batch"
consume_batches 4 9
rc=0
wait $FP || rc=$?
[ $rc = 0 ] || fail "resumed pipeline: exit $rc: $(cat "$JO_T/err6b")"
grep -q '"type":"summary".*"skipped":4' "$JO_T/out6b.jsonl" ||
	fail "resumed summary: $(tail -1 "$JO_T/out6b.jsonl")"
jo_log "phase 5: killed after done s3, the same command resumed at s4"

# ---------------------------------------------------------------- 6. one file
head -c $((8 * BS)) /dev/urandom >"$MP/one.bin"
sync
jfs_umount "$MP"
jfs_mount "$META" "$MP" "${MOPTS[@]}"
PYTHONPATH=$HERE "$PY" - "$JO_REPO/contrib/python" "$META" "$MP" "$JO_T/ctl7.sock" "$JO_BIN" "$BS" \
	"$JO_T/events7.jsonl" "$JO_T/reads7.jsonl" <<'EOF' || fail "one-file consumer failed"
import json, mmap, os, sys
sys.path.insert(0, sys.argv[1])
from jfsops_warmup import Pipeline
from warmup_follow_check import close_and_log
meta, mp, ctl, jfsops, bs = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])

def counters():
    c = {}
    for line in open(os.path.join(mp, ".stats")):
        k, v = line.split()
        c[k] = c.get(k, 0) + float(v)
    return (c.get("juicefs_blockcache_miss_bytes", 0), c.get("juicefs_blockcache_miss", 0),
            c.get("juicefs_blockcache_hit_bytes", 0))

p = Pipeline(meta, mp, ctl, ahead=2, jfsops=jfsops, evict_done=True)
p.feed((str(i), [("one.bin", i * bs + 10, 100)]) for i in range(8))
buf = mmap.mmap(-1, 4096)
out = open(sys.argv[8], "w")
for i in range(8):
    if not p.wait_ready(str(i), timeout=30):
        sys.exit("batch %d never ready" % i)
    m0, n0, h0 = counters()
    fd = os.open(os.path.join(mp, "one.bin"), os.O_RDONLY | os.O_DIRECT)
    os.preadv(fd, [buf], i * bs)
    os.close(fd)
    m1, n1, h1 = counters()
    out.write(json.dumps({"batch": str(i), "miss_bytes": m1 - m0, "misses": n1 - n0,
                          "hit_bytes": h1 - h0, "rows": 1}) + "\n")
    p.done(str(i))
sys.exit(close_and_log(p, 60, sys.argv[7]))
EOF
"${CHK[@]}" hits "$JO_T/reads7.jsonl" 0
"${CHK[@]}" window "$JO_T/events7.jsonl" 2
unready=$(grep -c '"type": "unready"' "$JO_T/events7.jsonl" || true)
[ "$unready" -ge 1 ] || fail "no batch was made unready by a whole-file eviction"
grep -q '"type": "summary".*"requeued": [1-9]' "$JO_T/events7.jsonl" ||
	fail "no block was warmed again: $(grep summary "$JO_T/events7.jsonl")"
echo one.bin | "$JO_BIN" warmup "$META" --mount "$MP" --check >"$JO_T/check7.txt"
grep -q ": 0 cached" "$JO_T/check7.txt" || fail "one.bin still cached: $(cat "$JO_T/check7.txt")"
jo_log "phase 6: one file, 8 batches: $unready batches warmed again after whole-file evictions, every read a hit"
jfs_umount "$MP"
echo "PASS warmup_follow"
