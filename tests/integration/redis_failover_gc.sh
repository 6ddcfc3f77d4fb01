#!/usr/bin/env bash
# gc across a Redis Sentinel failover: a volume formatted by the real juicefs
# on a Sentinel set (1 master, 1 replica, 3 sentinels on loopback), gc
# workers running when `SENTINEL FAILOVER` promotes the replica. The workers
# find the new master through the sentinels and carry on (deletes are audited
# after the failover), or leave what failed to the next run; nothing is
# treated as done that was not: after a final run, juicefs gc finds 0 leaked
# and 0 pending objects, juicefs fsck is clean, the bucket holds exactly the
# referenced objects and every file keeps its sha256. Then the same on a
# Redis Cluster whose slot is migrated to another master mid-run (ASK during
# the migration, MOVED after it).
. "$(dirname "$0")/lib/init.sh" engines gc

# fo_finish META NAME: gc runs until no task is left (a failed item stays in
# the metadata; the next plan finds it), then the end-state check.
fo_finish() {
	local meta=$1 name=$2 tries=0 left rc
	while :; do
		rc=0
		"$JO_BIN" gc "$meta" --delete --lease 2s >>"$JO_T/final-$name.log" 2>&1 || rc=$?
		[ "$rc" = 0 ] || [ "$rc" = 4 ] || { tail -n 20 "$JO_T/final-$name.log" >&2; jo_die "$name: final gc run failed ($rc)"; }
		left=$("$JO_BIN" gc "$meta" --status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"])')
		[ "$rc" = 0 ] && [ "$left" = 0 ] && break
		tries=$((tries + 1))
		[ $tries -lt 10 ] || jo_die "$name: gc never finished"
		sleep 1
	done
}

# fo_doctor_says META OUT LINE WHAT: jfsops doctor's report (kept in OUT)
# has LINE (a grep pattern), else the script dies with WHAT.
fo_doctor_says() {
	"$JO_BIN" doctor "$1" >"$2" 2>&1 || true
	grep -q "$3" "$2" || { cat "$2" >&2; jo_die "$4"; }
}

# fo_workers META NAME N: start N rate-limited workers (pids in FO_PIDS).
fo_workers() {
	local meta=$1 name=$2 n=$3 i
	FO_PIDS=()
	for i in $(seq 1 "$n"); do
		"$JO_BIN" gc "$meta" --worker --delete --delete-rate "${JO_FO_RATE:-12}" --lease 5s --id "f$i" \
			--audit "$JO_T/audit-$name.jsonl" --json >"$JO_T/fw$i-$name.json" 2>"$JO_T/fw$i-$name.err" &
		FO_PIDS+=($!)
	done
}

# fo_wait NAME: the workers end by themselves; 0 (all done) or 4 (some
# items failed and stay for the next run) only.
fo_wait() {
	local name=$1 i rc
	for i in "${!FO_PIDS[@]}"; do
		rc=0
		wait "${FO_PIDS[$i]}" || rc=$?
		echo "$name: worker $((i + 1)) exited $rc: $(tail -n 1 "$JO_T/fw$((i + 1))-$name.json" 2>/dev/null)" >&2
		[ "$rc" = 0 ] || [ "$rc" = 4 ] || { cat "$JO_T/fw$((i + 1))-$name.err" >&2; jo_die "$name: worker $((i + 1)) exited $rc"; }
	done
}

# fo_after NAME T0: audited deletes after unix time T0 (the workers carried on).
fo_after() {
	python3 - "$JO_T/audit-$1.jsonl" "$2" <<'PY'
import datetime, json, sys
t0 = float(sys.argv[2])
n = 0
for l in open(sys.argv[1]):
    a = json.loads(l)
    t = datetime.datetime.fromisoformat(a["time"].replace("Z", "+00:00")).timestamp()
    if a["action"] == "delete" and a["result"] == "ok" and t > t0:
        n += 1
print(n)
PY
}

# ---------------------------------------------------------------- Sentinel

e=redis-sentinel
engine_start $e
engine_new $e fo-sentinel
meta=$JO_META name=fo-sentinel mp=$JO_T/mnt-$name
JO_GC_FILES=${JO_FO_FILES:-600} gc_populate "$meta" "$JO_BUCKET" "$name" 0 "$mp"
old=$(jo_rs_master)
[ -n "$old" ] || jo_die "no sentinel names a master"
"$JO_BIN" doctor "$meta" >"$JO_T/doctor-before.txt" 2>&1 || true
grep -q "sentinel: master '$JO_RS_MASTER' at 127.0.0.1:$old" "$JO_T/doctor-before.txt" ||
	{ cat "$JO_T/doctor-before.txt" >&2; jo_die "doctor does not name the master $old"; }
"$JO_BIN" gc "$meta" --plan --delete --task-size 20 >/dev/null || jo_die "$name: plan failed"
fo_workers "$meta" "$name" 2
sleep 1
kill -0 "${FO_PIDS[0]}" 2>/dev/null || jo_die "$name: the workers finished before the failover (too little work)"
t0=$(date +%s.%N)
set -- $JO_SENT_PORTS
jo_sent_cli "$1" sentinel failover "$JO_RS_MASTER" | grep -q OK || jo_die "SENTINEL FAILOVER refused"
for i in $(seq 1 300); do
	new=$(jo_rs_master)
	[ -n "$new" ] && [ "$new" != "$old" ] && jo_rs_cli "$new" role 2>/dev/null | head -n 1 | grep -q master && break
	sleep 0.1
done
[ "$new" != "$old" ] || jo_die "the failover did not happen within 30 s"
t1=$(date +%s.%N)
echo "$name: failover $old -> $new in $(python3 -c "print('%.1f' % ($t1 - $t0))") s" >&2
fo_wait "$name"
after=$(fo_after "$name" "$t1")
echo "$name: $after objects deleted after the failover" >&2
[ "$after" -gt 0 ] || jo_die "$name: the workers did not carry on with the new master"
fo_doctor_says "$meta" "$JO_T/doctor-after.txt" "sentinel: master '$JO_RS_MASTER' at 127.0.0.1:$new" \
	"doctor does not name the new master $new"
fo_finish "$meta" "$name"
gc_check_end "$meta" "$JO_BUCKET" "$name" "$mp"
echo "redis_failover_gc: sentinel ok" >&2

# ---------------------------------------------------------------- Cluster

e=redis-cluster
engine_start $e
engine_new $e fo-cluster
meta=$JO_META name=fo-cluster mp=$JO_T/mnt-$name
JO_GC_FILES=${JO_FO_FILES:-600} gc_populate "$meta" "$JO_BUCKET" "$name" 0 "$mp"
db=${meta##*/}
set -- $JO_RC_PORTS
slot=$(redis-cli -p "$1" cluster keyslot "{$db}")
# the slot's owner and another master
src=$(redis-cli -p "$1" cluster slots | python3 -c '
import sys
l = sys.stdin.read().split()
i = 0
slot = int(sys.argv[1])
while i < len(l):
    a, b, host, port = int(l[i]), int(l[i + 1]), l[i + 2], l[i + 3]
    if a <= slot <= b:
        print(port)
    i += 5
' "$slot")
[ -n "$src" ] || jo_die "no owner of slot $slot"
for dst in $JO_RC_PORTS; do [ "$dst" != "$src" ] && break; done
srcid=$(redis-cli -p "$src" cluster myid)
dstid=$(redis-cli -p "$dst" cluster myid)
"$JO_BIN" gc "$meta" --plan --delete --task-size 20 >/dev/null || jo_die "$name: plan failed"
fo_workers "$meta" "$name" 2
sleep 1
kill -0 "${FO_PIDS[0]}" 2>/dev/null || jo_die "$name: the workers finished before the migration"
# migrate slot $slot from $src to $dst while they run, 50 keys at a time
redis-cli -p "$dst" cluster setslot "$slot" importing "$srcid" | grep -q OK || jo_die "IMPORTING failed"
redis-cli -p "$src" cluster setslot "$slot" migrating "$dstid" | grep -q OK || jo_die "MIGRATING failed"
while :; do
	mapfile -t keys < <(redis-cli --raw -p "$src" cluster getkeysinslot "$slot" 50 | grep -v '^$' || true)
	[ "${#keys[@]}" -gt 0 ] || break
	out=$(redis-cli -p "$src" migrate 127.0.0.1 "$dst" "" 0 5000 keys "${keys[@]}" 2>&1) || true
	case $out in OK | NOKEY) ;; *) jo_die "MIGRATE failed: $out" ;; esac
	moves=$((${moves:-0} + 1))
	[ "$moves" -lt 1000 ] || jo_die "the slot never emptied"
	sleep 0.05
done
for p in $JO_RC_PORTS; do redis-cli -p "$p" cluster setslot "$slot" node "$dstid" >/dev/null; done
t1=$(date +%s.%N)
echo "$name: slot $slot moved from $src to $dst" >&2
fo_wait "$name"
after=$(fo_after "$name" "$t1")
echo "$name: $after objects deleted after the migration" >&2
fo_doctor_says "$meta" "$JO_T/doctor-cluster.txt" "cluster: slot $slot of key prefix {$db} served by 127.0.0.1:$dst" \
	"doctor does not name the slot's new node $dst"
fo_finish "$meta" "$name"
gc_check_end "$meta" "$JO_BUCKET" "$name" "$mp"
echo "redis_failover_gc: cluster ok" >&2
echo "redis_failover_gc: ok"
