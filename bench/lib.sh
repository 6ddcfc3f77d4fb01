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

bench_measure() {
	local label=$1 before after
	shift
	before=$(bench_counters)
	if ! /usr/bin/time -f '%e %M' -o "$JO_T/$label.time" "$@" >"$JO_T/$label.out" 2>"$JO_T/$label.err"; then
		tail -n 20 "$JO_T/$label.err" >&2
		jo_die "$label failed: $*"
	fi
	after=$(bench_counters)
	python3 - "$JO_T/$label.time" "$before" "$after" >"$JO_T/$label.json" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.strip()]
secs, rss = lines[-1].split()
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

bench_field() {
	python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
		"$JO_T/$1.json" "$2"
}

bench_header() {
	echo "$1"
	echo "$NET_DESC"
	echo "date $(date -u +%Y-%m-%d), $(nproc) cores shared ($(uptime | sed 's/.*load average/load average/')), $(uname -m)"
}
