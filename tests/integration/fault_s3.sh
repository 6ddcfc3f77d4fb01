#!/usr/bin/env bash
# tests/integration/fault_s3.sh: jfsops against an S3 server (SeaweedFS) seen
# through faults: Toxiproxy (connection resets, truncated streams, a slow
# link) and tests/tools/s3shim.py (503 SlowDown / 500 InternalError replies,
# resets and cut bodies on chosen requests: only LIST continuation pages,
# only DeleteObjects, a fraction of everything). Redis holds the metadata
# and is not faulted here (fault_meta_scan.sh does that).
#
#   leakcheck  a LIST page that fails after the retries (503, reset, cut
#              stream), and a reset mid-listing: no report, "complete":
#              false, exit 3; a fault the retries absorb (one 500, one cut
#              body): the very same report as a clean run.
#   sync       a LIST page of SRC or DST failing, a reset mid-listing, with
#              --delete-dst: nothing deleted on DST, exit non-zero; 503 on a
#              share of every request: either DST == SRC or an exit that says
#              so, never a torn object (md5 of every DST object is one a
#              source version had); a clean rerun makes DST == SRC exactly.
#   --delete-from and gc --delete with DeleteObjects failing (always, or a
#              share): every object reported deleted is gone, every failed
#              one is still there and (gc) still referenced: juicefs gc finds
#              nothing leaked; a clean rerun finishes.
#   compact and warmup under 503s: juicefs fsck clean and every file's
#              sha256 unchanged; a clean rerun compacts.
#
# Ports: JO_PORT_BASE+0 redis, +1 toxiproxy API, +3 the S3 proxy, +4 the
# shim, +10..+13 SeaweedFS (+10010..), +30..+50 juicefs metrics.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/lib/gc.sh"
jo_setup
J=$JO_BIN
[ -x "$J" ] || jo_die "$J not built"
PY=$JO_VENV/bin/python
S3U="$PY $JO_REPO/tests/tools/s3util.py"
FAILS=0
ok() { echo "ok   - $*"; }
bad() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
has() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }

start_redis "$JO_PORT_BASE"
start_seaweed $((JO_PORT_BASE + 10))
start_toxiproxy $((JO_PORT_BASE + 1))
toxi_s3 s3 $((JO_PORT_BASE + 3))
TX=http://127.0.0.1:$((JO_PORT_BASE + 3))
start_s3_shim $((JO_PORT_BASE + 4))
SH=$JO_SHIM_ENDPOINT
EP=$JO_S3_ENDPOINT
AK=$JO_S3_AK
SK=$JO_S3_SK

summary_field() { # FILE FIELD: of the last "summary" JSON line (or the last JSON line)
	"$PY" - "$1" "$2" <<'PY'
import json, sys
v, last = None, None
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if isinstance(r, dict):
        last = r
        if r.get("type") == "summary":
            v = r
r = v or last or {}
x = r.get(sys.argv[2], "<absent>")
print(json.dumps(x) if not isinstance(x, str) else x)
PY
}

expect_incomplete() { # WHAT RC WANT OUT ERR
	local what=$1 rc=$2 want=$3 out=$4 err=$5 c
	has "$rc" "$want" && ok "$what: exit $rc" ||
		{ bad "$what: exit $rc, want one of: $want"; tail -n 5 "$err" | sed 's/^/    /'; }
	c=$(summary_field "$out" complete)
	[ "$c" = false ] && ok "$what: summary says complete: false" ||
		bad "$what: summary complete is '$c', want false"
	grep -q INCOMPLETE "$err" && ok "$what: says INCOMPLETE" || bad "$what: no INCOMPLETE line"
}

shim_faulted() { # WHAT MIN [TRIES]: the shim really injected at least MIN faults;
	# with TRIES, every faulted request was tried exactly TRIES times (--retries 1:
	# 1 + 2 tries on the throttle budget), so the faults are a multiple of TRIES,
	# which the default (1 + 10 tries) would not give
	local n
	n=$(shim_stat faults)
	[ "$n" -ge "$2" ] && ok "$1: the shim injected $n faults" || bad "$1: only $n faults injected (want >= $2)"
	[ -z "${3:-}" ] || { [ $((n % $3)) = 0 ] && ok "$1: $3 tries per request" ||
		bad "$1: $n faults injected, not a multiple of $3 tries per request (--retries not applied?)"; }
}

# slow_link BYTES: throttle the S3 proxy so BYTES take about 8 s
slow_link() {
	local kbs=$(($1 / 8 / 1024))
	[ "$kbs" -ge 1 ] || kbs=1
	toxi_bandwidth s3 slow "$kbs"
}

# ====================================================================== leakcheck
echo "== leakcheck listing"
s3_mkbucket lkf
METAL=redis://127.0.0.1:$JO_REDIS_PORT/1
jfs_format "$METAL" "$EP/lkf" lkf --block-size 64K --trash-days 0
mkdir -p "$JO_T/lsrc"
# 300 files of 4 blocks: 1200 block objects under the one listing prefix
# lkf/chunks/0/0/, i.e. two LIST pages there
"$PY" - "$JO_T/lsrc" <<'PY'
import os, sys
for i in range(300):
    with open(os.path.join(sys.argv[1], "f%03d" % i), "wb") as f:
        f.write(os.urandom(256 << 10))
PY
jfs_sync_in "$JO_T/lsrc" "$METAL"
jfs_dump "$METAL" "$JO_T/dump-l.json"
next=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["Counters"]["nextChunk"])' "$JO_T/dump-l.json")
maxid=$($S3U list "$EP" "$AK" "$SK" lkf lkf/chunks/ | awk '{print $1}' | sed 's,.*/,,; s,_.*,,' | sort -n | tail -1)
NLEAK=20
[ $((maxid + NLEAK + 1)) -lt "$next" ] || jo_die "no free slice ids below the counter ($maxid, $next)"
head -c 1000 /dev/urandom >"$JO_T/leak.blk"
: >"$JO_T/leaks.txt"
for id in $(seq $((maxid + 1)) $((maxid + NLEAK))); do
	key=lkf/chunks/0/$((id / 1000))/${id}_0_1000
	$S3U put "$EP" "$AK" "$SK" lkf "$key" "$JO_T/leak.blk"
	echo "$key" >>"$JO_T/leaks.txt"
done
sort -o "$JO_T/leaks.txt" "$JO_T/leaks.txt"
sleep 3
leaks_present() {
	$S3U list "$EP" "$AK" "$SK" lkf lkf/chunks/ | awk '{print $1}' | sort | comm -12 - "$JO_T/leaks.txt" | wc -l
}
LK=("$J" leakcheck "$METAL" --min-age 2s --json --list-threads 4)
report_keys() { # REPORT: "type key" of every line, sorted
	"$PY" -c 'import json,sys; print("\n".join(sorted("%s %s" % (r["type"], r["key"]) for r in map(json.loads, open(sys.argv[1])))))' "$1"
}

rc=0
"${LK[@]}" --bucket "$SH/lkf" --out "$JO_T/lk0.jsonl" >"$JO_T/lk0.out" 2>"$JO_T/lk0.err" || rc=$?
[ $rc = 1 ] && ok "leakcheck clean: exit 1" || { bad "leakcheck clean: exit $rc"; tail -3 "$JO_T/lk0.err"; }
report_keys "$JO_T/lk0.jsonl" >"$JO_T/lk0.keys"
sed 's/^/leaked /' "$JO_T/leaks.txt" | cmp -s - "$JO_T/lk0.keys" && ok "leakcheck clean: exactly the $NLEAK planted leaks" ||
	bad "leakcheck clean: report differs from the planted leaks"
[ "$(shim_stat kinds.list)" -gt 3 ] || bad "leakcheck did not list through the shim"
conts=$(grep -c '^[0-9.]* list GET .*continuation-token' "$JO_T/s3shim-$((JO_PORT_BASE + 4)).log" || true)
[ "$conts" -ge 1 ] && ok "leakcheck clean: the listing has continuation pages ($conts)" ||
	bad "leakcheck clean: no LIST continuation page: the faults below would miss"

# persistent faults on the continuation pages: 503, reset, cut body; and a
# truncated stream (Toxiproxy limit_data) on every connection
i=0
for rule in '{"kinds":["list"],"continued":true,"status":503,"code":"SlowDown"}' \
	'{"kinds":["list"],"continued":true,"action":"reset"}' \
	'{"kinds":["list"],"continued":true,"action":"truncate"}' \
	'{"kinds":["list"],"continued":true,"status":500,"code":"InternalError"}'; do
	i=$((i + 1))
	shim_rules "[$rule]"
	rc=0
	"${LK[@]}" --bucket "$SH/lkf" --out "$JO_T/lkf$i.jsonl" >"$JO_T/lkf$i.out" 2>"$JO_T/lkf$i.err" || rc=$?
	expect_incomplete "leakcheck, LIST page fault $rule" "$rc" "3" "$JO_T/lkf$i.out" "$JO_T/lkf$i.err"
	shim_faulted "leakcheck, $rule" 6
	[ ! -e "$JO_T/lkf$i.jsonl" ] && [ ! -e "$JO_T/lkf$i.jsonl.tmp" ] || bad "leakcheck, $rule: a report was left"
done
shim_clear
toxi_limit_data s3 cut 30000
rc=0
"${LK[@]}" --bucket "$TX/lkf" --out "$JO_T/lkt.jsonl" >"$JO_T/lkt.out" 2>"$JO_T/lkt.err" || rc=$?
toxi_clear s3
expect_incomplete "leakcheck, every S3 stream cut after 30000 bytes" "$rc" "3" "$JO_T/lkt.out" "$JO_T/lkt.err"
# a reset in the middle of the listing (a slowed link, then RST on everything)
b0=$(toxi_bytes s3)
"${LK[@]}" --bucket "$TX/lkf" --out "$JO_T/lkb.jsonl" >/dev/null 2>&1 || true
LBYTES=$(($(toxi_bytes s3) - b0))
slow_link "$LBYTES"
(sleep 3; toxi_reset_peer s3 rst 0) &
rp=$!
rc=0
"${LK[@]}" --bucket "$TX/lkf" --out "$JO_T/lkr.jsonl" >"$JO_T/lkr.out" 2>"$JO_T/lkr.err" || rc=$?
wait $rp || true
toxi_clear s3
expect_incomplete "leakcheck, connections reset mid-listing" "$rc" "3 5" "$JO_T/lkr.out" "$JO_T/lkr.err"
[ ! -e "$JO_T/lkr.jsonl" ] || bad "leakcheck, reset mid-listing: a report was left"

# faults the retries absorb: the listing resumes at the right place
for rule in '{"kinds":["list"],"continued":true,"status":500,"code":"InternalError","limit":2}' \
	'{"kinds":["list"],"continued":true,"action":"truncate","limit":1}' \
	'{"kinds":["list"],"fraction":0.3,"status":503}'; do
	shim_rules "[$rule]"
	rc=0
	"${LK[@]}" --bucket "$SH/lkf" --out "$JO_T/lka.jsonl" >"$JO_T/lka.out" 2>"$JO_T/lka.err" || rc=$?
	shim_faulted "leakcheck, transient $rule" 1
	[ $rc = 1 ] && report_keys "$JO_T/lka.jsonl" | cmp -s - "$JO_T/lk0.keys" &&
		[ "$(summary_field "$JO_T/lka.out" objects)" = "$(summary_field "$JO_T/lk0.out" objects)" ] &&
		ok "leakcheck, transient $rule: retried, the same report as the clean run" ||
		bad "leakcheck, transient $rule: exit $rc or a different report"
done
shim_clear

# --delete-from while DeleteObjects fails: always, then for a share
shim_rules '[{"kinds":["delete_multi","delete"],"status":503,"code":"SlowDown"}]'
rc=0
"$J" leakcheck "$METAL" --bucket "$SH/lkf" --min-age 2s --json --delete-from "$JO_T/lk0.jsonl" \
	--delete-rate 4 --retries 1 --audit "$JO_T/lkdel1.audit" >"$JO_T/lkdel1.out" 2>"$JO_T/lkdel1.err" || rc=$?
shim_faulted "--delete-from, DeleteObjects always 503, --retries 1" 6 3
[ $rc = 4 ] && [ "$(summary_field "$JO_T/lkdel1.out" failed)" = "$NLEAK" ] &&
	[ "$(summary_field "$JO_T/lkdel1.out" deleted)" = 0 ] && [ "$(leaks_present)" = "$NLEAK" ] &&
	ok "--delete-from, DeleteObjects always 503: exit 4, all $NLEAK failed, all still there" ||
	bad "--delete-from, DeleteObjects always 503: exit $rc, $(summary_field "$JO_T/lkdel1.out" failed) failed, $(leaks_present) present"
[ "$(grep -c '"result":"failed' "$JO_T/lkdel1.audit" || true)" = "$NLEAK" ] &&
	ok "--delete-from: every failed delete audited as failed" || bad "--delete-from: audit lines wrong"
shim_rules '[{"kinds":["delete_multi","delete"],"fraction":0.6,"status":503,"code":"SlowDown"}]'
rc=0
"$J" leakcheck "$METAL" --bucket "$SH/lkf" --min-age 2s --json --delete-from "$JO_T/lk0.jsonl" \
	--delete-rate 4 --audit "$JO_T/lkdel2.audit" >"$JO_T/lkdel2.out" 2>"$JO_T/lkdel2.err" || rc=$?
dl=$(summary_field "$JO_T/lkdel2.out" deleted)
fl=$(summary_field "$JO_T/lkdel2.out" failed)
"$PY" - "$JO_T/lkdel2.audit" "$JO_T/leaks.txt" "$EP" "$AK" "$SK" <<'PY' && ok "--delete-from, 60% 503: every key deleted is gone, every failed one is there (exit $rc, $dl deleted, $fl failed)" || bad "--delete-from, 60% 503: audit and bucket disagree"
import json, subprocess, sys
audit, leaks, ep, ak, sk = sys.argv[1:6]
import os
have = set(l.split()[0] for l in subprocess.run(
    [sys.executable, os.path.join(os.environ["JO_REPO"], "tests/tools/s3util.py"), "list", ep, ak, sk,
     "lkf", "lkf/chunks/"], capture_output=True, text=True, check=True).stdout.splitlines())
res = {}
for r in map(json.loads, open(audit)):
    res[r["key"]] = r["result"]
for k in (l.strip() for l in open(leaks)):
    r = res.get(k, "")
    if r == "deleted" and k in have:
        sys.exit("%s reported deleted but present" % k)
    if r.startswith("failed") and k not in have:
        sys.exit("%s reported failed but gone" % k)
PY
[ $((dl + fl + $(summary_field "$JO_T/lkdel2.out" kept))) = "$NLEAK" ] ||
	bad "--delete-from, 60% 503: deleted + failed + kept != $NLEAK"
case $rc in 0) [ "$fl" = 0 ] || bad "exit 0 with failures" ;; 4) [ "$fl" -gt 0 ] || bad "exit 4 without failures" ;;
*) bad "--delete-from, 60% 503: exit $rc" ;; esac
shim_clear
rc=0
"$J" leakcheck "$METAL" --bucket "$SH/lkf" --min-age 2s --json --delete-from "$JO_T/lk0.jsonl" \
	>"$JO_T/lkdel3.out" 2>"$JO_T/lkdel3.err" || rc=$?
[ $rc = 0 ] && [ "$(leaks_present)" = 0 ] && ok "--delete-from rerun: every leak gone" ||
	bad "--delete-from rerun: exit $rc, $(leaks_present) leaks left"
rc=0
"${LK[@]}" --out "$JO_T/lkend.jsonl" >"$JO_T/lkend.out" 2>/dev/null || rc=$?
[ $rc = 0 ] && ok "leakcheck after: clean" || bad "leakcheck after: exit $rc"
"$JUICEFS" fsck --no-agent "$METAL" >"$JO_T/fsck-l.log" 2>&1 && ok "leakcheck volume: juicefs fsck clean" ||
	{ bad "leakcheck volume: juicefs fsck failed"; tail -5 "$JO_T/fsck-l.log"; }

# ====================================================================== sync
echo "== sync"
s3_mkbucket ssrc
s3_mkbucket sdst
export JFSOPS_SRC_ACCESS_KEY=$AK JFSOPS_SRC_SECRET_KEY=$SK JFSOPS_DST_ACCESS_KEY=$AK JFSOPS_DST_SECRET_KEY=$SK
side() { echo "s3://$1?endpoint=$2&path_style=1"; }
mkdir -p "$JO_T/ssrc" "$JO_T/sext"
"$PY" - "$JO_T/ssrc" "$JO_T/sext" <<'PY'
import os, random, sys
r = random.Random(7)
for i in range(1500):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(r.randbytes(r.randrange(10, 4000)))
for i in range(2):  # multipart copies
    with open(os.path.join(sys.argv[1], "big%d" % i), "wb") as f:
        f.write(r.randbytes(12 << 20))
for i in range(40):
    with open(os.path.join(sys.argv[2], "x%03d" % i), "wb") as f:
        f.write(r.randbytes(100))
PY
SY=(--no-state --json --multipart-threshold 8M --part-size 5M)
"$J" sync -q "${SY[@]}" "$JO_T/ssrc" "$(side ssrc/data/ "$EP")" >/dev/null || jo_die "sync: seeding SRC failed"
"$J" sync -q "${SY[@]}" "$(side ssrc/data/ "$EP")" "$(side sdst/copy/ "$EP")" >/dev/null || jo_die "sync: first copy failed"
"$J" sync -q "${SY[@]}" "$JO_T/sext" "$(side sdst/copy/ "$EP")" >/dev/null || jo_die "sync: extras failed"
dst_keys() { $S3U list "$EP" "$AK" "$SK" sdst copy/ | awk '{print $1}' | sort; }
dst_keys >"$JO_T/dst0.keys"
[ "$(wc -l <"$JO_T/dst0.keys")" = 1542 ] || jo_die "sync: DST has $(wc -l <"$JO_T/dst0.keys") keys, want 1542"

sync_case() { # NAME WANT SRC-EP DST-EP [extra sync flags]: --delete-dst under a fault
	local name=$1 want=$2 sep=$3 dep=$4 rc=0
	shift 4
	"$J" sync "${SY[@]}" --delete-dst "$@" "$(side ssrc/data/ "$sep")" "$(side sdst/copy/ "$dep")" \
		>"$JO_T/sync-$name.out" 2>"$JO_T/sync-$name.err" || rc=$?
	expect_incomplete "sync --delete-dst, $name" "$rc" "$want" "$JO_T/sync-$name.out" "$JO_T/sync-$name.err"
	dst_keys | cmp -s - "$JO_T/dst0.keys" && ok "sync --delete-dst, $name: nothing deleted on DST" ||
		bad "sync --delete-dst, $name: DST lost objects"
}
shim_rules '[{"kinds":["list"],"continued":true,"list_prefix":"data/","status":503}]'
sync_case "SRC LIST page 2 503" 3 "$SH" "$EP" --list-threads 1
shim_faulted "sync, SRC LIST page 2" 6
shim_rules '[{"kinds":["list"],"continued":true,"list_prefix":"copy/","action":"reset"}]'
sync_case "DST LIST page 2 reset" 3 "$EP" "$SH" --list-threads 1
shim_faulted "sync, DST LIST page 2" 6
shim_rules '[{"kinds":["list"],"list_prefix":"data/","status":500,"code":"InternalError","after":3}]'
sync_case "SRC range listers 500" 3 "$SH" "$EP"
shim_clear
b0=$(toxi_bytes s3)
"$J" sync "${SY[@]}" --dry-run "$(side ssrc/data/ "$EP")" "$(side sdst/copy/ "$TX")" --list-threads 1 >/dev/null 2>&1 || true
slow_link $(($(toxi_bytes s3) - b0))
(sleep 3; toxi_reset_peer s3 rst 0) &
rp=$!
sync_case "DST connections reset mid-listing" "3 5" "$EP" "$TX" --list-threads 1
wait $rp || true
toxi_clear s3

# change SRC (new versions, new objects, removed ones), remember every version
$S3U md5s "$EP" "$AK" "$SK" ssrc data/ | sed 's,^data/,,' >"$JO_T/src-old.md5"
"$PY" - "$JO_T/ssrc" <<'PY'
import os, random, sys
r = random.Random(8)
d = sys.argv[1]
for i in range(0, 1500, 50):
    with open(os.path.join(d, "f%04d" % i), "wb") as f:
        f.write(r.randbytes(r.randrange(10, 4000)))
for i in range(1500, 1520):
    with open(os.path.join(d, "f%04d" % i), "wb") as f:
        f.write(r.randbytes(500))
for i in range(1, 1500, 100):
    os.unlink(os.path.join(d, "f%04d" % i))
with open(os.path.join(d, "big1"), "wb") as f:
    f.write(r.randbytes(13 << 20))
PY
"$J" sync -q "${SY[@]}" --delete-dst "$JO_T/ssrc" "$(side ssrc/data/ "$EP")" >/dev/null || jo_die "sync: changing SRC failed"
$S3U md5s "$EP" "$AK" "$SK" ssrc data/ | sed 's,^data/,,' >"$JO_T/src-new.md5"
cat "$JO_T/src-old.md5" "$JO_T/src-new.md5" | awk '{print $1, $2}' | LC_ALL=C sort -u >"$JO_T/versions"
check_no_torn() { # WHAT: every DST object holds bytes some SRC version had (or is an extra)
	$S3U md5s "$EP" "$AK" "$SK" sdst copy/ | sed 's,^copy/,,' | awk '{print $1, $2}' | LC_ALL=C sort >"$JO_T/dst.md5"
	LC_ALL=C comm -23 "$JO_T/dst.md5" "$JO_T/versions" | grep -v '^x[0-9]* ' >"$JO_T/torn" || true
	if [ -s "$JO_T/torn" ]; then
		bad "$1: torn or foreign objects on DST: $(head -3 "$JO_T/torn" | tr '\n' ' ')"
	else
		ok "$1: no torn object on DST (md5 of every object matches a source version)"
	fi
}
check_exact() { # WHAT: DST == SRC, object for object
	$S3U md5s "$EP" "$AK" "$SK" sdst copy/ | sed 's,^copy/,,' | awk '{print $1, $2}' | LC_ALL=C sort >"$JO_T/dst.md5"
	awk '{print $1, $2}' "$JO_T/src-new.md5" | LC_ALL=C sort | cmp -s - "$JO_T/dst.md5" &&
		ok "$1: DST == SRC (md5 of every object)" || bad "$1: DST differs from SRC"
}
# 1: a share of the reads and writes fail with no retry (copies fail, the
# listings complete; client-side copies: GET + PUT / multipart); 2: a share
# of every request (server-side copies), with the default retries
for try in "writes --retries 0 --no-server-side" "all"; do
	set -- $try
	name=$1
	shift
	if [ "$name" = writes ]; then
		shim_rules '[{"kinds":["get","put","put_part","copy","mpu_create","mpu_complete"],"fraction":0.3,"status":503,"code":"SlowDown"}]'
	else
		shim_rules '[{"fraction":0.3,"status":503,"code":"SlowDown"}]'
	fi
	rc=0
	"$J" sync "${SY[@]}" --delete-dst "$@" "$(side ssrc/data/ "$SH")" "$(side sdst/copy/ "$SH")" \
		>"$JO_T/sync-$name.out" 2>"$JO_T/sync-$name.err" || rc=$?
	shim_faulted "sync, 30% 503 ($name)" 1
	check_no_torn "sync, 30% 503 ($name), exit $rc"
	case $rc in
	0) check_exact "sync, 30% 503 ($name)" ;;
	4) [ "$(summary_field "$JO_T/sync-$name.out" failed)" -gt 0 ] && [ "$(summary_field "$JO_T/sync-$name.out" deleted)" = 0 ] &&
		ok "sync, 30% 503 ($name): exit 4, failures counted, deletions refused" ||
		bad "sync, 30% 503 ($name): exit 4 but failed/deleted do not say so" ;;
	3 | 5) expect_incomplete "sync, 30% 503 ($name)" "$rc" "3 5" "$JO_T/sync-$name.out" "$JO_T/sync-$name.err"
		dst_keys | grep -q '^copy/x000$' && ok "sync, 30% 503 ($name): no deletion" || bad "sync, 30% 503 ($name): deleted" ;;
	*) bad "sync, 30% 503 ($name): exit $rc" ;;
	esac
done
shim_clear
rc=0
"$J" sync "${SY[@]}" --delete-dst "$(side ssrc/data/ "$SH")" "$(side sdst/copy/ "$SH")" >"$JO_T/sync-end.out" 2>&1 || rc=$?
[ $rc = 0 ] && ok "sync rerun: exit 0" || bad "sync rerun: exit $rc"
check_exact "sync rerun"

# ====================================================================== gc --delete
echo "== gc --delete"
s3_mkbucket gcf
METAG=redis://127.0.0.1:$JO_REDIS_PORT/2
JO_GC_FILES=${FAULT_GC_FILES:-300} gc_populate "$METAG" "$EP/gcf" gcf 0 "$JO_T/mnt-gcf"
gc_bucket_keys "$EP/gcf" gcf >"$JO_T/gcf0.keys"
gc_leaked() { gc_juicefs_gc "$METAG" "$JO_T/gcf-$1.log"; gc_count "$JO_T/gcf-$1.log" leaked; }
shim_rules '[{"kinds":["delete_multi","delete"],"status":503,"code":"SlowDown"}]'
rc=0
"$J" gc "$METAG" --bucket "$SH/gcf" --delete --batch 10 --retries 1 --json >"$JO_T/gcf1.out" 2>"$JO_T/gcf1.err" || rc=$?
shim_faulted "gc --delete, DeleteObjects always 503, --retries 1" 6 3
[ $rc = 4 ] && [ "$(summary_field "$JO_T/gcf1.out" object_errors)" -gt 0 ] &&
	ok "gc --delete, DeleteObjects always 503: exit 4, object errors counted" ||
	bad "gc --delete, DeleteObjects always 503: exit $rc, $(summary_field "$JO_T/gcf1.out" object_errors) object errors"
gc_bucket_keys "$EP/gcf" gcf >"$JO_T/gcf1.keys"
gone=$(comm -23 "$JO_T/gcf0.keys" "$JO_T/gcf1.keys" | wc -l)
[ "$gone" = 0 ] && ok "gc --delete, DeleteObjects always 503: nothing deleted" ||
	{ bad "gc --delete, DeleteObjects always 503: $gone objects went:"; comm -23 "$JO_T/gcf0.keys" "$JO_T/gcf1.keys" | head -5;
	  grep -v '(fault)' "$JO_T/s3shim-$((JO_PORT_BASE + 4)).log" | grep -E ' (delete|delete_multi) ' | head -5; }
comm -13 "$JO_T/gcf0.keys" "$JO_T/gcf1.keys" | head -3 | sed 's/^/    note: appeared: /'
[ "$(gc_leaked a)" = 0 ] && ok "gc --delete, DeleteObjects always 503: no reference dropped (juicefs gc: 0 leaked)" ||
	bad "gc --delete, DeleteObjects always 503: references dropped for objects still there"
shim_rules '[{"kinds":["delete_multi"],"fraction":0.5,"status":503,"code":"SlowDown"},{"kinds":["get","head","list"],"fraction":0.2,"status":500,"code":"InternalError"}]'
rc=0
"$J" gc "$METAG" --bucket "$SH/gcf" --delete --batch 10 --json >"$JO_T/gcf2.out" 2>"$JO_T/gcf2.err" || rc=$?
shim_faulted "gc --delete, 50% DeleteObjects 503" 1
has "$rc" "0 4" && ok "gc --delete, 50% 503: exit $rc" || { bad "gc --delete, 50% 503: exit $rc"; tail -3 "$JO_T/gcf2.err"; }
[ "$(gc_leaked b)" = 0 ] && ok "gc --delete, 50% 503: no reference dropped (juicefs gc: 0 leaked)" ||
	bad "gc --delete, 50% 503: references dropped for objects still there"
"$JUICEFS" fsck --no-agent "$METAG" >"$JO_T/fsck-g.log" 2>&1 && ok "gc --delete, 50% 503: juicefs fsck clean" ||
	bad "gc --delete, 50% 503: juicefs fsck failed"
shim_clear
rc=0
"$J" gc "$METAG" --bucket "$SH/gcf" --delete --json >"$JO_T/gcf3.out" 2>"$JO_T/gcf3.err" || rc=$?
[ $rc = 0 ] && ok "gc --delete rerun: exit 0" || bad "gc --delete rerun: exit $rc"
gc_check_end "$METAG" "$EP/gcf" gcf "$JO_T/mnt-gcf"
ok "gc: end state: juicefs gc clean, fsck clean, bucket == referenced blocks, sha256 unchanged"

# ====================================================================== compact, warmup
echo "== compact and warmup"
s3_mkbucket cmf
METAC=redis://127.0.0.1:$JO_REDIS_PORT/3
jfs_format "$METAC" "$EP/cmf" cmf --trash-days 0
MPC=$JO_T/mnt-cmf
MIR=$JO_T/mirror-cmf
mkdir -p "$MIR"
jfs_mount "$METAC" "$MPC" --no-bgjob
for f in a:1:90:3145728 b:2:80:2097152 c:3:60:716800; do
	IFS=: read -r n seed w sz <<<"$f"
	"$PY" "$JO_REPO/tests/tools/fragment.py" "$MPC/$n" "$MIR/$n" "$seed" "$w" "$sz"
done
jfs_umount "$MPC"
maxrec() { "$J" info "$METAC" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["max_records_per_chunk"])'; }
check_files() { # WHAT: fsck clean and every file reads back as its mirror
	"$JUICEFS" fsck --no-agent "$METAC" >"$JO_T/fsck-c.log" 2>&1 && ok "$1: juicefs fsck clean" ||
		{ bad "$1: juicefs fsck failed"; tail -5 "$JO_T/fsck-c.log"; }
	jfs_mount "$METAC" "$MPC" --no-bgjob
	local f badn=0
	for f in "$MIR"/*; do
		[ "$(sha256sum <"$MPC/${f##*/}")" = "$(sha256sum <"$f")" ] || badn=$((badn + 1))
	done
	jfs_umount "$MPC"
	[ $badn = 0 ] && ok "$1: every file's sha256 unchanged" || bad "$1: $badn files changed"
}
before=$(maxrec)
[ "$before" -ge 60 ] || jo_die "compact: the most records in a chunk is $before"
shim_rules '[{"kinds":["put","put_part","mpu_create","mpu_complete"],"status":503,"code":"SlowDown"}]'
rc=0
"$J" compact "$METAC" --bucket "$SH/cmf" --apply --json >"$JO_T/cmp1.out" 2>"$JO_T/cmp1.err" || rc=$?
shim_faulted "compact, every PUT 503" 6
[ $rc = 4 ] && [ "$(summary_field "$JO_T/cmp1.out" failed)" -gt 0 ] && [ "$(maxrec)" = "$before" ] &&
	ok "compact, every PUT 503: exit 4, chunks failed, nothing committed" ||
	bad "compact, every PUT 503: exit $rc, $(summary_field "$JO_T/cmp1.out" failed) failed, max records $(maxrec)"
check_files "compact, every PUT 503"
shim_rules '[{"fraction":0.3,"status":503,"code":"SlowDown"}]'
toxi_latency s3 lat 20
rc=0
"$J" compact "$METAC" --bucket "$TX/cmf" --apply --json >"$JO_T/cmp2a.out" 2>"$JO_T/cmp2a.err" || rc=$?
has "$rc" "0 4" && ok "compact over a slow link: exit $rc" || bad "compact over a slow link: exit $rc"
toxi_clear s3
"$JUICEFS" gc --no-agent "$METAC" --delete >/dev/null 2>&1 || true # old slices of the first compaction
"$JUICEFS" fsck --no-agent "$METAC" >/dev/null 2>&1 || bad "compact over a slow link: juicefs fsck failed"
jfs_mount "$METAC" "$MPC" --no-bgjob
for f in "$MIR"/*; do  # rewrite: fragmented again for the faulted compaction
	"$PY" "$JO_REPO/tests/tools/fragment.py" "$MPC/${f##*/}.2" "$MIR/${f##*/}.2" 9 70 1048576
done
jfs_umount "$MPC"
rc=0
"$J" compact "$METAC" --bucket "$SH/cmf" --apply --json >"$JO_T/cmp2.out" 2>"$JO_T/cmp2.err" || rc=$?
shim_faulted "compact, 30% 503" 1
has "$rc" "0 4" && ok "compact, 30% 503: exit $rc" || { bad "compact, 30% 503: exit $rc"; tail -3 "$JO_T/cmp2.err"; }
check_files "compact, 30% 503"
shim_clear
rc=0
"$J" compact "$METAC" --bucket "$SH/cmf" --apply --json >"$JO_T/cmp3.out" 2>"$JO_T/cmp3.err" || rc=$?
[ $rc = 0 ] && [ "$(maxrec)" -lt 10 ] && ok "compact rerun: exit 0, every chunk compacted ($(maxrec) records at most)" ||
	bad "compact rerun: exit $rc, $(maxrec) records at most"
check_files "compact rerun"

# warmup through a mount whose object store is the shim
jfs_mount "$METAC" "$MPC" --no-bgjob --bucket "$SH/cmf" --cache-size 512
ls "$MIR" >"$JO_T/ranges.txt"
shim_rules '[{"kinds":["get"],"fraction":0.5,"status":503,"code":"SlowDown"}]'
rc=0
"$J" warmup "$METAC" --ranges "$JO_T/ranges.txt" --mount "$MPC" --json >"$JO_T/wu1.out" 2>"$JO_T/wu1.err" || rc=$?
shim_faulted "warmup, 50% GET 503" 1
case $rc in
0) ok "warmup, 50% GET 503: exit 0 (the client's retries absorbed them)" ;;
4) [ "$(summary_field "$JO_T/wu1.out" failed)" != 0 ] && ok "warmup, 50% GET 503: exit 4, failed blocks counted" ||
	bad "warmup, 50% GET 503: exit 4 without failed blocks" ;;
*) bad "warmup, 50% GET 503: exit $rc"; tail -3 "$JO_T/wu1.err" ;;
esac
shim_clear
jfs_umount "$MPC"
check_files "warmup under 503s"

if [ "$FAILS" -gt 0 ]; then
	echo "$FAILS check(s) failed"
	exit 1
fi
echo "fault_s3: all checks passed"
