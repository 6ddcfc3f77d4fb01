# shellcheck shell=bash
# bench/lib.sh: what the bench scripts share (sourced after
# tests/lib/services.sh). The network presets themselves (net_preset,
# net_start, net_s3, net_meta, net_on, net_conns, net_limit) are in
# tests/lib/services.sh.
#
#   bench_measure LABEL CMD...   run CMD once under /usr/bin/time; write
#                                $JO_T/LABEL.json: seconds, peak RSS, and what
#                                changed meanwhile on the counters named in
#                                BENCH_BUCKETS (SeaweedFS requests per bucket,
#                                by kind) and BENCH_PROXIES (connections
#                                accepted, bytes each way, per proxy)
#   bench_field LABEL EXPR       a value of that JSON (a Python expression on
#                                `r`, e.g. 'r["seconds"]')
#   bench_header TITLE           the title, the preset line, date and machine
#   bench_cpu_report             where the CPU went in each measured run: the
#                                tool's own, SeaweedFS's and Toxiproxy's (and
#                                BENCH_CPU_PIDS="NAME:PID ..."), against what
#                                the machine's cores give in the run's time
# The command's stdout goes to $JO_T/LABEL.out, its stderr to LABEL.err; a
# failing command ends the bench (its stderr tail shown).

BENCH_BUCKETS=${BENCH_BUCKETS:-}
BENCH_PROXIES=${BENCH_PROXIES:-}

[ -x /usr/bin/time ] || jo_die "/usr/bin/time is missing (apt-get install time)"

# bench_counters: one JSON object with the counters right now.
bench_counters() {
	local b p reqs="" conns="" bytes=""
	for b in $BENCH_BUCKETS; do
		reqs+="\"$b\": \"$(s3_requests "$b")\", "
	done
	for p in $BENCH_PROXIES; do
		if [ "$NET_NAME" = loopback ]; then
			conns+="\"$p\": null, "
			bytes+="\"$p\": null, "
		else
			conns+="\"$p\": $(net_conns "$p"), "
			bytes+="\"$p\": [$(toxi_bytes "$p" upstream), $(toxi_bytes "$p" downstream)], "
		fi
	done
	echo "{\"requests\": {${reqs%, }}, \"conns\": {${conns%, }}, \"bytes\": {${bytes%, }}}"
}

# bench_cpu_ticks: "NAME:TICKS ..." of the servers (utime + stime, clock ticks;
# a NAME ending in "+" also counts the children it has reaped: PostgreSQL's
# backends, one per connection, end with their connection).
bench_cpu_ticks() {
	local x name pid t out=""
	for x in ${JO_SEAWEED_PID:+seaweedfs:$JO_SEAWEED_PID} ${JO_TOXI_PID:+toxiproxy:$JO_TOXI_PID} \
		${BENCH_CPU_PIDS:-}; do
		name=${x%%:*} pid=${x#*:}
		# fields 14 to 17 of /proc/PID/stat, counted after the ")" of the name
		t=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null |
			awk -v all="${name: -1}" '{print $12 + $13 + (all == "+" ? $14 + $15 : 0)}') || t=
		[ -n "$t" ] && out+="${name%+}:$t "
	done
	echo "$out"
}

# bench_redis_cpu: count the first Redis server's CPU too (after engine_start redis).
bench_redis_cpu() {
	local pf=${JO_REDIS_PIDS[0]:-}
	[ -n "$pf" ] && [ -s "$pf" ] && BENCH_CPU_PIDS="${BENCH_CPU_PIDS:-} redis:$(cat "$pf")"
	return 0
}

# bench_engine_cpu E: count engine E's server, and only it, from now on (redis:
# the first Redis server; postgres: the postmaster with its ended backends;
# others: none).
bench_engine_cpu() {
	BENCH_CPU_PIDS=
	case $1 in
	redis) bench_redis_cpu ;;
	postgres)
		[ -s "${JO_PG_DATA:-}/postmaster.pid" ] &&
			BENCH_CPU_PIDS="postgres+:$(head -1 "$JO_PG_DATA/postmaster.pid")"
		;;
	esac
	return 0
}

bench_measure() {
	local label=$1 before after cpu0 cpu1
	shift
	before=$(bench_counters)
	cpu0=$(bench_cpu_ticks)
	if ! /usr/bin/time -f '%e %M %U %S' -o "$JO_T/$label.time" "$@" >"$JO_T/$label.out" 2>"$JO_T/$label.err"; then
		tail -n 20 "$JO_T/$label.err" >&2
		jo_die "$label failed: $*"
	fi
	cpu1=$(bench_cpu_ticks)
	after=$(bench_counters)
	python3 - "$JO_T/$label.time" "$cpu0" "$cpu1" "$(getconf CLK_TCK)" "$(nproc)" >"$JO_T/$label.cpu" <<'PY'
import sys
secs, rss, user, sys_ = [l for l in open(sys.argv[1]).read().split("\n") if l.strip()][-1].split()[:4]
tick, cores = float(sys.argv[4]), int(sys.argv[5])
a = dict(x.split(":") for x in sys.argv[2].split())
b = dict(x.split(":") for x in sys.argv[3].split())
parts = [("tool", float(user) + float(sys_))]
parts += [(k, (int(b[k]) - int(a[k])) / tick) for k in b if k in a]
total = sum(v for _, v in parts)
print("%.2f s wall; CPU %s = %.2f of the %.2f CPU-s %d cores give in that time (%.0f%%)"
      % (float(secs), ", ".join("%s %.2f s" % kv for kv in parts), total, float(secs) * cores,
         cores, 100 * total / max(float(secs) * cores, 1e-9)))
PY
	python3 - "$JO_T/$label.time" "$before" "$after" >"$JO_T/$label.json" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.strip()]
secs, rss = lines[-1].split()[:2]
a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
def kinds(s):
    return {k: int(v) for k, v in (x.split("=") for x in s.split())}
req = {}
for bucket in b["requests"]:
    x, y = kinds(a["requests"][bucket]), kinds(b["requests"][bucket])
    req[bucket] = {k: y[k] - x.get(k, 0) for k in y if y[k] - x.get(k, 0)}
    req[bucket].setdefault("total", 0)
conns, byts = {}, {}
for p in b["conns"]:
    conns[p] = None if b["conns"][p] is None else b["conns"][p] - a["conns"][p]
    byts[p] = None if b["bytes"][p] is None else [y - x for x, y in zip(a["bytes"][p], b["bytes"][p])]
print(json.dumps({"seconds": float(secs), "rss_kib": int(rss), "requests": req,
                  "conns": conns, "bytes": byts}))
PY
}

bench_cpu_report() {
	local f
	echo "where the CPU went (the tool's own from /usr/bin/time, the servers' from /proc; near 100% of"
	echo "the cores means the run was CPU-bound on this machine, not bound by the network preset):"
	for f in "$JO_T"/*.cpu; do
		[ -e "$f" ] || continue
		echo "  $(basename "$f" .cpu): $(cat "$f")"
	done
}

bench_field() {
	python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$JO_T/$1.json" "$2"
}

bench_header() {
	echo "$1"
	echo "$NET_DESC"
	echo "date $(date -u +%Y-%m-%d), $(nproc) cores shared ($(uptime | sed 's/.*load average/load average/')), $(uname -m)"
}
