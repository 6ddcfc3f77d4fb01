# shellcheck shell=bash
# tests/lib/services.sh: start and stop the real peer services of the jfsops
# test bed on loopback (Redis, SeaweedFS S3, rclone serve s3, JuiceFS mounts).
#
# Source it from a bash test script (set -euo pipefail friendly):
#   . "$(dirname "$0")/../lib/services.sh"
#   jo_setup                        # temp dir $JO_T + EXIT trap that stops all
#   start_redis $((JO_PORT_BASE+0))
#   start_seaweed $((JO_PORT_BASE+10))
#   s3_mkbucket jfs1
#   jfs_format "redis://127.0.0.1:$JO_REDIS_PORT/1" "$JO_S3_ENDPOINT/jfs1" vol1
#   jfs_mount "redis://127.0.0.1:$JO_REDIS_PORT/1" "$JO_T/mnt"
#
# Functions: jo_setup; start_redis PORT [redis-server args]; start_seaweed
# BASE [AK SK]; start_rclone_s3 PORT [AK SK]; s3_mkbucket NAME [EP AK SK];
# s3_list_keys BUCKET [EP AK SK]; jfs_format META BUCKET NAME [flags];
# jfs_mount META MP [flags]; jfs_umount MP; jfs_crash MP [PIDS];
# jfs_mount_pids MP; jfs_sync_in SRCDIR META [DSTPATH]; jfs_dump META OUT;
# jo_port_busy PORT; jo_log MSG; jo_die MSG. JO_KEEP=1 keeps $JO_T.
#
# Every service takes explicit ports. A port that is already in use, or a
# service that does not answer in time, makes the function print a message
# (with the service's log tail) and exit the script non-zero: nothing is
# skipped silently. Processes are stopped by pid, never by name.
#
# Faults between jfsops and its servers (tests/install.sh builds Toxiproxy
# v2.12.0 into the venv as toxiproxy-server and toxiproxy-cli):
#
#   Toxiproxy, a real TCP proxy that misbehaves on request. One server, any
#   number of proxies, each in front of one service; point jfsops (never the
#   juicefs client, unless the test wants it faulted too) at the proxy port.
#     start_toxiproxy PORT              API on 127.0.0.1:PORT ($JO_TOXI_API)
#     toxi_proxy NAME LISTEN UPSTREAM   a proxy 127.0.0.1:LISTEN -> UPSTREAM
#                                       (HOST:PORT or PORT); enabled, no toxics
#     toxi_redis NAME LISTEN            the same in front of $JO_REDIS_PORT
#     toxi_s3 NAME LISTEN [ENDPOINT]    in front of an S3 endpoint (default
#                                       $JO_S3_ENDPOINT); the signed Host header
#                                       is the proxy's, which the server accepts
#     toxi_reset_peer PROXY TOXIC MS [STREAM]   TCP RST MS ms after data flows
#     toxi_timeout PROXY TOXIC MS [STREAM]      data stops; closed after MS ms
#                                               (0: held open, stalled for good)
#     toxi_limit_data PROXY TOXIC BYTES [STREAM] the stream is cut after BYTES
#                                               bytes (per connection)
#     toxi_latency PROXY TOXIC MS [JITTER] [STREAM]
#     toxi_bandwidth PROXY TOXIC KB_PER_S [STREAM]
#     toxi_slicer PROXY TOXIC AVG_BYTES VARIATION DELAY_US [STREAM]
#     toxi_add PROXY TOXIC TYPE STREAM ATTRS_JSON [TOXICITY]  any other toxic
#     toxi_remove PROXY TOXIC; toxi_clear PROXY (every toxic of PROXY);
#     toxi_disable PROXY / toxi_enable PROXY (refuse / accept connections)
#     toxi_bytes PROXY [STREAM]         bytes it passed so far, all connections
#                                       (to place a limit_data cut mid-scan)
#   STREAM is downstream (server -> jfsops, the default) or upstream. Toxics
#   apply to open connections too, so one added while a command runs cuts it
#   mid-scan. All calls go to Toxiproxy's HTTP API with curl and fail the
#   script when the API refuses them.
#
#   tests/tools/s3shim.py, our HTTP shim for what a TCP proxy cannot say: it
#   forwards every S3 request unchanged and, by rules, answers chosen ones
#   itself (503 SlowDown, 500 InternalError, any status/code; or a reset, a
#   close, a reply cut mid-body, a delay) on a fraction, every Nth, the Nth
#   only, only some request kinds (list, get, put, delete, delete_multi,
#   ...; LIST continuation pages only), keys or prefixes. See its docstring.
#     start_s3_shim PORT [UPSTREAM]     shim on 127.0.0.1:PORT ($JO_SHIM_ENDPOINT)
#                                       in front of UPSTREAM ($JO_S3_ENDPOINT)
#     shim_rules 'JSON LIST'            replace the rules (counters reset)
#     shim_clear                        no rules: forward everything
#     shim_stats                        the counters as JSON on stdout
#     shim_stat PATH                    one counter, e.g. faults, kinds.list,
#                                       faults_by_kind.delete_multi (0 if absent)
#     shim_aliases 'JSON'               show keys SeaweedFS cannot store ("a//b",
#                                       "./a", "/a", "../a"), each backed by an
#                                       upstream object (see the shim's docstring)
#   Its request log is $JO_T/s3shim-PORT.log.

JO_REPO=${JO_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
JO_PORT_BASE=${JO_PORT_BASE:-7000}

JO_MOUNTS=()       # mount points to unmount
JO_KILL_PIDS=()    # foreground servers (weed, rclone) to SIGTERM
JO_REDIS_PIDS=()   # redis-server pidfiles
JO_SOCK_PORTS=()   # ports of seaweedfs unix sockets in /tmp
JO_NEXT_METRICS=0  # next juicefs metrics port offset
declare -gA JO_MOUNT_KEY=() # mount point -> its --cache-dir (identifies its processes)
JO_CLEANUP_HOOKS=() # functions jo_cleanup calls after the mounts are gone (engines.sh)

jo_die() {
	echo "FATAL: $*" >&2
	exit 1
}

jo_log() {
	echo "[$(date +%H:%M:%S)] $*" >&2
}

# jo_port_busy PORT: true when something listens on 127.0.0.1:PORT.
jo_port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

jo_need_free_port() {
	local p
	for p in "$@"; do
		if jo_port_busy "$p"; then
			jo_die "port 127.0.0.1:$p is already in use (pick another JO_PORT_BASE)"
		fi
	done
}

# jo_random_files DIR PATH:SIZE...: random files of SIZE bytes at DIR/PATH
# (parent directories made as needed).
jo_random_files() {
	local dir=$1 f
	shift
	for f in "$@"; do
		mkdir -p "$(dirname "$dir/${f%:*}")"
		head -c "${f##*:}" /dev/urandom >"$dir/${f%:*}"
	done
}

# jo_tail FILE: the last lines of a log, for failure messages.
jo_tail() {
	if [ -f "$1" ]; then
		echo "---- last lines of $1 ----" >&2
		tail -n "${2:-30}" "$1" >&2 || true
		echo "----" >&2
	fi
}

jo_setup() {
	JO_T=$(mktemp -d "${TMPDIR:-/tmp}/jo-test.XXXXXX")
	export JO_T
	JO_BIN=${JFSOPS_BIN:-$JO_REPO/build/jfsops}
	JO_VENV=${JO_VENV:-$JO_REPO/.venv}
	JUICEFS=${JUICEFS:-$JO_VENV/bin/juicefs}
	WEED=${WEED:-$JO_VENV/bin/weed}
	RCLONE=${RCLONE:-$JO_VENV/bin/rclone}
	export JO_BIN JO_VENV JUICEFS WEED RCLONE JO_PORT_BASE JO_REPO
	# every --json summary of this script's runs, checked against the
	# schema when the script ends (jo_cleanup); in a directory of its own,
	# made now, so that a script comparing what $JO_T holds before and after
	# a run sees no new name
	mkdir "$JO_T/.summaries"
	export JFSOPS_SUMMARY_LOG=$JO_T/.summaries/summaries.jsonl
	local t
	for t in "$JUICEFS" "$WEED" "$RCLONE"; do
		[ -x "$t" ] || jo_die "$t is missing: run bash tests/install.sh"
	done
	trap 'jo_cleanup || exit $?' EXIT # a summary that fails the schema fails the script
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

jo_cleanup() {
	local rc=$? mp pid pf i p
	set +e
	# 0. the --json summaries the script's runs printed (JFSOPS_SUMMARY_LOG),
	# and the --json output it kept (summary and leakcheck candidate lines in
	# files beside them, not below a mount), against docs/json's schemas
	if [ -n "${JO_T:-}" ] && [ -d "$JO_T" ] && mkdir -p "$JO_T/.summaries"; then
		{
			[ ! -s "${JFSOPS_SUMMARY_LOG:-}" ] ||
				"$JO_VENV/bin/python" "$JO_REPO/tests/tools/jsoncheck.py" "$JFSOPS_SUMMARY_LOG"
			find "$JO_T" -xdev -maxdepth 3 -type f -size -20M \
				\( -name '*.json' -o -name '*.jsonl' -o -name '*.out' \) ! -path "$JO_T/.summaries/*" \
				-print0 2>/dev/null | xargs -0 -r "$JO_VENV/bin/python" \
				"$JO_REPO/tests/tools/jsoncheck.py" --outputs
		} >"$JO_T/.summaries/check" 2>&1
		if grep -q '^FAIL\|Traceback' "$JO_T/.summaries/check"; then
			grep '^FAIL\|Error' "$JO_T/.summaries/check" | head -n 20 >&2
			echo "FATAL: --json output does not match docs/json's schemas" >&2
			[ "$rc" != 0 ] || rc=1
		else
			echo "json: $(grep '^ok' "$JO_T/.summaries/check" | sed "s|$JO_T/||" | tr '\n' ' ')" >&2
		fi
	fi
	# 1. JuiceFS mounts (before their metadata and object servers go away)
	for ((i = ${#JO_MOUNTS[@]} - 1; i >= 0; i--)); do
		mp=${JO_MOUNTS[i]}
		[ -n "$mp" ] || continue
		jo_umount_quiet "$mp"
	done
	JO_MOUNTS=()
	# 1b. servers started by other test-bed files (engines.sh)
	for i in "${JO_CLEANUP_HOOKS[@]}"; do
		"$i"
	done
	# 2. S3 servers by pid
	for pid in "${JO_KILL_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${JO_KILL_PIDS[@]}"; do
		for i in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	JO_KILL_PIDS=()
	# 3. Redis servers by pid (from their pidfiles)
	for pf in "${JO_REDIS_PIDS[@]}"; do
		pid=$(cat "$pf" 2>/dev/null) || continue
		[ -n "$pid" ] || continue
		kill -TERM "$pid" 2>/dev/null
		for i in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
	done
	JO_REDIS_PIDS=()
	# 4. data, 5. seaweedfs sockets of our ports
	if [ -n "${JO_T:-}" ] && [ -d "$JO_T" ]; then
		if [ -n "${JO_KEEP:-}" ]; then
			echo "JO_KEEP set: keeping $JO_T" >&2
		else
			rm -rf "$JO_T"
		fi
	fi
	for p in "${JO_SOCK_PORTS[@]}"; do
		rm -f "/tmp/seaweedfs-master-grpc-$p.sock" "/tmp/seaweedfs-volume-grpc-$p.sock" \
			"/tmp/seaweedfs-filer-grpc-$p.sock" "/tmp/seaweedfs-s3-grpc-$p.sock" \
			"/tmp/seaweedfs-filer-$p.sock" "/tmp/seaweedfs-s3-$p.sock"
	done
	JO_SOCK_PORTS=()
	return $rc
}

# ---------------------------------------------------------------- Redis

# start_redis PORT [extra redis-server args, e.g. --requirepass PW]
start_redis() {
	local port=$1
	shift
	[ -n "${JO_T:-}" ] || jo_die "start_redis: call jo_setup first"
	jo_need_free_port "$port"
	local dir=$JO_T/redis-$port
	mkdir -p "$dir"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize yes --dir "$dir" --logfile "$dir/redis.log" \
		--pidfile "$dir/redis.pid" "$@" >/dev/null ||
		{ jo_tail "$dir/redis.log"; jo_die "redis-server on port $port did not start"; }
	JO_REDIS_PIDS+=("$dir/redis.pid")
	local i auth=()
	local a prev=
	for a in "$@"; do
		[ "$prev" = --requirepass ] && auth=(-a "$a" --no-auth-warning)
		prev=$a
	done
	for i in $(seq 1 100); do
		if [ "$(redis-cli -h 127.0.0.1 -p "$port" "${auth[@]}" ping 2>/dev/null)" = PONG ]; then
			# make sure it is our server (pidfile written) and not someone else's
			[ -s "$dir/redis.pid" ] && kill -0 "$(cat "$dir/redis.pid")" 2>/dev/null ||
				jo_die "redis on port $port answers but is not ours"
			JO_REDIS_PORT=$port
			export JO_REDIS_PORT
			return 0
		fi
		sleep 0.1
	done
	jo_tail "$dir/redis.log"
	jo_die "redis-server on 127.0.0.1:$port did not answer PING within 10 s"
}

# ---------------------------------------------------------------- S3

# jo_s3_curl ENDPOINT AK SK [curl args...] URLPATH: a SigV4-signed request.
jo_s3_curl() {
	local ep=$1 ak=$2 sk=$3
	shift 3
	curl -sS --max-time 20 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" "$@"
}

# jo_wait_s3 NAME LOG ENDPOINT AK SK: wait for an S3 server: any HTTP answer,
# then a signed ListBuckets that succeeds (60 s in all).
jo_wait_s3() {
	local name=$1 log=$2 ep=$3 ak=$4 sk=$5 pid=$6 i code
	for i in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || { jo_tail "$log" 40; jo_die "$name exited during start-up"; }
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
			--aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" "$ep/" 2>/dev/null) || true
		[ "$code" = 200 ] && return 0
		sleep 0.1
	done
	jo_tail "$log" 40
	jo_die "$name at $ep did not accept a signed request within 60 s (last HTTP status '$code')"
}

# start_seaweed BASEPORT [AK SK]: weed server with master BASE, volume BASE+1,
# filer BASE+2, s3 BASE+3 (gRPC ports +10000).
start_seaweed() {
	local base=$1 ak=${2:-testak} sk=${3:-testsk}
	[ -n "${JO_T:-}" ] || jo_die "start_seaweed: call jo_setup first"
	local mp=$base vp=$((base + 1)) fp=$((base + 2)) sp=$((base + 3))
	jo_need_free_port $mp $vp $fp $sp $((mp + 10000)) $((vp + 10000)) $((fp + 10000)) $((sp + 10000))
	local d=$JO_T/seaweed-$base
	mkdir -p "$d/data" "$d/log"
	cat >"$d/s3.json" <<EOF
{"identities":[{"name":"jotest","credentials":[{"accessKey":"$ak","secretKey":"$sk"}],
 "actions":["Admin","Read","List","Tagging","Write"]}]}
EOF
	JO_SOCK_PORTS+=($mp $vp $fp $sp $((mp + 10000)) $((vp + 10000)) $((fp + 10000)) $((sp + 10000)))
	WEED_MASTER_VOLUME_GROWTH_COPY_1=1 \
		"$WEED" -logdir="$d/log" server -dir="$d/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-master.port=$mp -master.port.grpc=$((mp + 10000)) \
		-volume.port=$vp -volume.port.grpc=$((vp + 10000)) \
		-filer.port=$fp -filer.port.grpc=$((fp + 10000)) \
		-s3 -s3.port=$sp -s3.port.grpc=$((sp + 10000)) -s3.port.iceberg=0 -s3.port.lance=0 \
		-s3.config="$d/s3.json" \
		-master.volumeSizeLimitMB="${JO_WEED_VOLUME_MB:-64}" -volume.max="${JO_WEED_VOLUME_MAX:-200}" \
		-master.telemetry=false -metricsPort="${JO_WEED_METRICS_PORT:-0}" \
		>"$d/weed.out" 2>&1 &
	local pid=$!
	JO_KILL_PIDS+=("$pid")
	local ep=http://127.0.0.1:$sp i
	for i in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || { jo_tail "$d/weed.out" 40; jo_die "weed server exited during start-up"; }
		curl -sf -o /dev/null --max-time 2 "$ep/healthz" 2>/dev/null && break
		sleep 0.1
	done
	jo_wait_s3 "SeaweedFS S3" "$d/weed.out" "$ep" "$ak" "$sk" "$pid"
	JO_S3_ENDPOINT=$ep
	JO_S3_AK=$ak
	JO_S3_SK=$sk
	JO_SEAWEED_PID=$pid
	JO_SEAWEED_LOG=$d/weed.out
	export JO_S3_ENDPOINT JO_S3_AK JO_S3_SK JO_SEAWEED_PID JO_SEAWEED_LOG
	if [ -n "${JO_WEED_METRICS_PORT:-}" ]; then
		JO_WEED_METRICS=http://127.0.0.1:$JO_WEED_METRICS_PORT/metrics
		curl -sf --max-time 5 -o /dev/null "$JO_WEED_METRICS" ||
			jo_die "SeaweedFS metrics on port $JO_WEED_METRICS_PORT do not answer"
		export JO_WEED_METRICS
	fi
}

# s3_requests BUCKET: the S3 requests SeaweedFS served for BUCKET so far, by
# kind, as one line "total=N GET=n PUT=n ..." (its own Prometheus counters;
# start_seaweed with JO_WEED_METRICS_PORT set). Every tool is counted the same
# way, at the server.
s3_requests() {
	[ -n "${JO_WEED_METRICS:-}" ] || jo_die "s3_requests: start_seaweed with JO_WEED_METRICS_PORT"
	curl -sf --max-time 10 "$JO_WEED_METRICS" | python3 -c '
import re, sys
b = sys.argv[1]
by = {}
for line in sys.stdin:
    m = re.match(r"SeaweedFS_s3_request_total\{(.*)\} (\S+)$", line.strip())
    if not m:
        continue
    lab = dict(re.findall(r"(\w+)=\"([^\"]*)\"", m.group(1)))
    if lab.get("bucket") != b:
        continue
    by[lab.get("type", "?")] = by.get(lab.get("type", "?"), 0) + int(float(m.group(2)))
print(" ".join(["total=%d" % sum(by.values())] + ["%s=%d" % kv for kv in sorted(by.items())]))' "$1" ||
		jo_die "s3_requests: cannot read SeaweedFS metrics"
}

# s3_req_delta BEFORE AFTER: the request count between two s3_requests lines.
s3_req_delta() {
	python3 -c '
import sys
a = dict(x.split("=") for x in sys.argv[1].split())
b = dict(x.split("=") for x in sys.argv[2].split())
print(" ".join("%s=%d" % (k, int(b[k]) - int(a.get(k, 0))) for k in b if int(b[k]) - int(a.get(k, 0))) or "total=0")' "$1" "$2"
}

# start_rclone_s3 PORT [AK SK]: rclone serve s3 on its own root directory.
start_rclone_s3() {
	local port=$1 ak=${2:-rcak} sk=${3:-rcsk}
	[ -n "${JO_T:-}" ] || jo_die "start_rclone_s3: call jo_setup first"
	jo_need_free_port "$port"
	local d=$JO_T/rclone-$port
	mkdir -p "$d/root"
	"$RCLONE" serve s3 --config /dev/null --addr "127.0.0.1:$port" --auth-key "$ak,$sk" \
		"$d/root" >"$d/rclone.out" 2>&1 &
	local pid=$!
	JO_KILL_PIDS+=("$pid")
	JO_RS3_ENDPOINT=http://127.0.0.1:$port
	jo_wait_s3 "rclone serve s3" "$d/rclone.out" "$JO_RS3_ENDPOINT" "$ak" "$sk" "$pid"
	JO_RS3_AK=$ak
	JO_RS3_SK=$sk
	JO_RS3_ROOT=$d/root
	export JO_RS3_ENDPOINT JO_RS3_AK JO_RS3_SK JO_RS3_ROOT
}

# s3_mkbucket NAME [ENDPOINT AK SK]: create a bucket (default: the SeaweedFS one).
s3_mkbucket() {
	local b=$1 ep=${2:-${JO_S3_ENDPOINT:-}} ak=${3:-${JO_S3_AK:-}} sk=${4:-${JO_S3_SK:-}}
	[ -n "$ep" ] || jo_die "s3_mkbucket: no endpoint (start_seaweed first)"
	local out code
	out=$(jo_s3_curl "$ep" "$ak" "$sk" -X PUT -H 'Content-Length: 0' \
		-w '\n%{http_code}' "$ep/$b") || jo_die "s3_mkbucket $b: request to $ep failed"
	code=${out##*$'\n'}
	case $code in
	200) return 0 ;;
	409) case $out in *BucketAlreadyOwnedByYou* | *BucketAlreadyExists*) return 0 ;; esac ;;
	esac
	jo_die "s3_mkbucket $b at $ep: HTTP $code: ${out%$'\n'*}"
}

# s3_list_keys BUCKET [ENDPOINT AK SK]: all keys of a bucket, one a line
# (ListObjectsV2, paginated).
s3_list_keys() {
	local b=$1 ep=${2:-${JO_S3_ENDPOINT:-}} ak=${3:-${JO_S3_AK:-}} sk=${4:-${JO_S3_SK:-}}
	"$JO_VENV/bin/python" "$JO_REPO/tests/tools/s3util.py" list "$ep" "$ak" "$sk" "$b"
}

# ---------------------------------------------------------------- JuiceFS

# jo_metrics_port: a free loopback port for a juicefs metrics listener, from
# JO_PORT_BASE+30 .. JO_PORT_BASE+50 (round robin, busy ones skipped).
jo_metrics_port() {
	local i p
	for i in $(seq 0 20); do
		p=$((JO_PORT_BASE + 30 + (JO_NEXT_METRICS + i) % 21))
		if ! jo_port_busy "$p"; then
			echo "$p"
			return 0
		fi
	done
	jo_die "no free juicefs metrics port in $((JO_PORT_BASE + 30))..$((JO_PORT_BASE + 50))"
}

# jfs_format META BUCKET NAME [juicefs format flags...]
# BUCKET is a directory (storage file) or http://HOST:PORT/bucket (storage s3;
# the keys default to the SeaweedFS ones unless --access-key is given).
jfs_format() {
	local meta=$1 bucket=$2 name=$3
	shift 3
	local args=() a keys=0
	for a in "$@"; do
		case $a in --access-key | --access-key=* | --secret-key | --secret-key=*) keys=1 ;; esac
	done
	case $bucket in
	http://* | https://*)
		args=(--storage s3 --bucket "$bucket")
		[ $keys = 1 ] || args+=(--access-key "${JO_S3_AK:-}" --secret-key "${JO_S3_SK:-}")
		;;
	*)
		mkdir -p "$bucket"
		args=(--storage file --bucket "$bucket")
		;;
	esac
	local log=$JO_T/format-$name.log
	if ! "$JUICEFS" format --no-agent "${args[@]}" "$@" "$meta" "$name" >"$log" 2>&1; then
		jo_tail "$log"
		jo_die "juicefs format $name failed"
	fi
}

# jfs_mount META MP [extra juicefs mount flags]
jfs_mount() {
	local meta=$1 mp=$2
	shift 2
	[ -n "${JO_T:-}" ] || jo_die "jfs_mount: call jo_setup first"
	local n=${#JO_MOUNTS[@]}
	local port
	port=$(jo_metrics_port)
	JO_NEXT_METRICS=$((port - JO_PORT_BASE - 30 + 1))
	mkdir -p "$mp" "$JO_T/jfscache-$n"
	local log=$JO_T/mount-$n.log
	if ! "$JUICEFS" mount -d --no-agent --no-usage-report --backup-meta 0 \
		--cache-dir "$JO_T/jfscache-$n" --cache-size "${JO_CACHE_MB:-1024}" \
		--metrics "127.0.0.1:$port" --log "$log" "$@" "$meta" "$mp" >"$log.out" 2>&1; then
		jo_tail "$log.out"
		jo_tail "$log"
		jo_die "juicefs mount $mp failed"
	fi
	JO_MOUNTS+=("$mp")
	JO_MOUNT_KEY[$mp]=$JO_T/jfscache-$n
	mountpoint -q "$mp" || { jo_tail "$log"; jo_die "juicefs mount: $mp is not a mount point"; }
}

jo_umount_quiet() {
	local mp=$1 i
	mountpoint -q "$mp" 2>/dev/null || return 0
	"$JUICEFS" umount "$mp" >/dev/null 2>&1 || "$JUICEFS" umount -f "$mp" >/dev/null 2>&1 ||
		umount -l "$mp" >/dev/null 2>&1
	for i in $(seq 1 100); do
		mountpoint -q "$mp" 2>/dev/null || return 0
		sleep 0.1
	done
	umount -l "$mp" >/dev/null 2>&1
	return 0
}

# jo_pid_running PID: true while PID exists and is not a zombie.
jo_pid_running() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "${st%% *}" != Z ]
}

# jfs_umount MP: unmount (flushing) and forget the mount.
jfs_umount() {
	local mp=$1 i p pids
	pids=$(jfs_mount_pids "$mp")
	if mountpoint -q "$mp"; then
		"$JUICEFS" umount --flush "$mp" >/dev/null 2>&1 || jo_umount_quiet "$mp"
	fi
	for i in $(seq 1 100); do
		mountpoint -q "$mp" || break
		sleep 0.1
	done
	mountpoint -q "$mp" && jo_die "jfs_umount: $mp is still mounted"
	for i in "${!JO_MOUNTS[@]}"; do
		[ "${JO_MOUNTS[i]}" = "$mp" ] && JO_MOUNTS[i]=
	done
	# the worker closes its session before it exits: wait for the mount's
	# processes to be gone (10 s at most each), not a fixed half second that
	# a loaded machine may not honour (a mount jfs_mount did not make: the
	# half second)
	[ -n "$pids" ] || sleep 0.5
	for p in $pids; do
		for i in $(seq 1 200); do
			jo_pid_running "$p" || break
			sleep 0.05
		done
	done
	return 0
}

# jfs_sync_in SRCDIR META [DSTPATH]: juicefs sync SRCDIR/ jfs://META/DSTPATH/
jfs_sync_in() {
	local src=${1%/} meta=$2 dst=${3:-}
	dst=${dst#/}
	[ -z "$dst" ] || dst=${dst%/}/
	local port
	port=$(jo_metrics_port)
	JO_NEXT_METRICS=$((port - JO_PORT_BASE - 30 + 1))
	local log=$JO_T/sync-$RANDOM.log
	if ! JO_SYNC_META=$meta "$JUICEFS" sync --no-agent --metrics "127.0.0.1:$port" \
		"$src/" "jfs://JO_SYNC_META/$dst" >"$log" 2>&1; then
		jo_tail "$log"
		jo_die "juicefs sync $src -> jfs://$dst failed"
	fi
}

# jfs_dump META OUT: juicefs dump to a JSON file.
jfs_dump() {
	local meta=$1 out=$2
	local log=$JO_T/dump-$RANDOM.log
	if ! "$JUICEFS" dump --no-agent "$meta" "$out" >"$log" 2>&1; then
		jo_tail "$log"
		jo_die "juicefs dump failed"
	fi
}

# jfs_mount_pids MP: pids of the juicefs processes (supervisor and worker)
# serving our mount point MP. juicefs rewrites its process title (arguments
# joined by spaces, cut to the original length), so the match is on the
# unique --cache-dir that jfs_mount gave this mount.
jfs_mount_pids() {
	local mp=$1 d cmd key
	key=${JO_MOUNT_KEY[$mp]:-}
	[ -n "$key" ] || return 0
	for d in /proc/[0-9]*; do
		cmd=$( { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
		case $cmd in *juicefs*" mount "*"--cache-dir $key "*) echo "${d#/proc/}" ;; esac
	done
}

# jfs_crash MP: SIGKILL the juicefs processes of mount MP (as a crash would),
# then detach the dead mount point. Work in flight (such as the background
# deletion of removed files) is left unfinished in the metadata.
# Pass the pids (from jfs_mount_pids, taken beforehand) to kill without delay.
jfs_crash() {
	local mp=$1 pids i
	shift
	pids=${*:-$(jfs_mount_pids "$mp")}
	[ -n "$pids" ] || jo_die "jfs_crash: no juicefs process serves $mp"
	# shellcheck disable=SC2086
	kill -STOP $pids 2>/dev/null || true
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
	umount -l "$mp" 2>/dev/null || true
	for i in "${!JO_MOUNTS[@]}"; do
		[ "${JO_MOUNTS[i]}" = "$mp" ] && JO_MOUNTS[i]=
	done
	sleep 0.2
}

# ---------------------------------------------------------------- faults

# start_toxiproxy PORT: the Toxiproxy server, its HTTP API on 127.0.0.1:PORT.
start_toxiproxy() {
	local port=$1
	[ -n "${JO_T:-}" ] || jo_die "start_toxiproxy: call jo_setup first"
	TOXIPROXY=${TOXIPROXY:-$JO_VENV/bin/toxiproxy-server}
	[ -x "$TOXIPROXY" ] || jo_die "$TOXIPROXY is missing: run bash tests/install.sh"
	jo_need_free_port "$port"
	local log=$JO_T/toxiproxy-$port.log i
	# JO_TOXI_LOG_LEVEL (info, debug, trace...): benchmarks keep the log to a
	# line per connection ("Accepted client", which net_conns counts)
	LOG_LEVEL=${JO_TOXI_LOG_LEVEL:-trace} \
		"$TOXIPROXY" -host 127.0.0.1 -port "$port" -proxy-metrics >"$log" 2>&1 &
	local pid=$!
	JO_KILL_PIDS+=("$pid")
	JO_TOXI_API=http://127.0.0.1:$port
	JO_TOXI_LOG=$log
	JO_TOXI_PID=$pid
	jo_wait_http "$pid" "$log" toxiproxy-server "$port" "$JO_TOXI_API/version"
	export JO_TOXI_API JO_TOXI_LOG JO_TOXI_PID
}

# jo_wait_http PID LOG NAME PORT URL: wait up to 10 s for URL to answer; the
# script dies (with LOG's last lines) if PID exits first or nothing answers.
jo_wait_http() {
	local pid=$1 log=$2 name=$3 port=$4 url=$5 i
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { jo_tail "$log"; jo_die "$name exited during start-up"; }
		curl -sf --max-time 2 "$url" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	jo_tail "$log"
	jo_die "$name on 127.0.0.1:$port did not answer within 10 s"
}

# jo_toxi_call METHOD PATH [JSON]: one API call; dies unless it succeeds.
jo_toxi_call() {
	local method=$1 path=$2 body=${3:-} out code
	[ -n "${JO_TOXI_API:-}" ] || jo_die "toxiproxy: call start_toxiproxy first"
	if [ -n "$body" ]; then
		out=$(curl -sS --max-time 10 -X "$method" -H 'Content-Type: application/json' \
			--data-binary "$body" -w '\n%{http_code}' "$JO_TOXI_API$path") ||
			jo_die "toxiproxy $method $path: request failed"
	else
		out=$(curl -sS --max-time 10 -X "$method" -w '\n%{http_code}' "$JO_TOXI_API$path") ||
			jo_die "toxiproxy $method $path: request failed"
	fi
	code=${out##*$'\n'}
	case $code in 2??) printf '%s' "${out%$'\n'*}" ;;
	*) jo_die "toxiproxy $method $path ${body:+$body }-> HTTP $code: ${out%$'\n'*}" ;;
	esac
}

# toxi_proxy NAME LISTEN_PORT UPSTREAM (HOST:PORT, or PORT on 127.0.0.1)
toxi_proxy() {
	local name=$1 listen=$2 up=$3
	case $up in *:*) ;; *) up=127.0.0.1:$up ;; esac
	jo_need_free_port "$listen"
	jo_toxi_call POST /proxies \
		"{\"name\":\"$name\",\"listen\":\"127.0.0.1:$listen\",\"upstream\":\"$up\",\"enabled\":true}" >/dev/null
	jo_port_busy "$listen" || jo_die "toxiproxy: proxy $name does not listen on $listen"
}

toxi_redis() {
	[ -n "${JO_REDIS_PORT:-}" ] || jo_die "toxi_redis: start_redis first"
	toxi_proxy "$1" "$2" "$JO_REDIS_PORT"
}

toxi_s3() {
	local ep=${3:-${JO_S3_ENDPOINT:-}} hp
	[ -n "$ep" ] || jo_die "toxi_s3: no endpoint (start_seaweed first)"
	hp=${ep#http://}
	hp=${hp%%/*}
	toxi_proxy "$1" "$2" "$hp"
}

# toxi_add PROXY TOXIC TYPE STREAM ATTRS_JSON [TOXICITY]
toxi_add() {
	local proxy=$1 toxic=$2 type=$3 stream=${4:-downstream} attrs=${5:-"{}"} tox=${6:-1.0}
	jo_toxi_call POST "/proxies/$proxy/toxics" \
		"{\"name\":\"$toxic\",\"type\":\"$type\",\"stream\":\"$stream\",\"toxicity\":$tox,\"attributes\":$attrs}" >/dev/null
}

toxi_reset_peer() { toxi_add "$1" "$2" reset_peer "${4:-downstream}" "{\"timeout\":$3}"; }
toxi_timeout() { toxi_add "$1" "$2" timeout "${4:-downstream}" "{\"timeout\":$3}"; }
toxi_limit_data() { toxi_add "$1" "$2" limit_data "${4:-downstream}" "{\"bytes\":$3}"; }
toxi_latency() { toxi_add "$1" "$2" latency "${5:-downstream}" "{\"latency\":$3,\"jitter\":${4:-0}}"; }
toxi_bandwidth() { toxi_add "$1" "$2" bandwidth "${4:-downstream}" "{\"rate\":$3}"; }
toxi_slicer() {
	toxi_add "$1" "$2" slicer "${6:-downstream}" \
		"{\"average_size\":$3,\"size_variation\":$4,\"delay\":$5}"
}

toxi_remove() { jo_toxi_call DELETE "/proxies/$1/toxics/$2" >/dev/null; }

toxi_clear() {
	local t
	for t in $(jo_toxi_call GET "/proxies/$1/toxics" |
		"$JO_VENV/bin/python" -c 'import json,sys; print("\n".join(t["name"] for t in json.load(sys.stdin)))'); do
		toxi_remove "$1" "$t"
	done
}

toxi_disable() { jo_toxi_call POST "/proxies/$1" '{"enabled":false}' >/dev/null; }

toxi_bytes() {
	curl -sf --max-time 10 "$JO_TOXI_API/metrics" | "$JO_VENV/bin/python" -c '
import re, sys
proxy, stream = sys.argv[1], sys.argv[2]
n = 0
for line in sys.stdin:
    m = re.match(r"toxiproxy_proxy_sent_bytes_total\{(.*)\} (\S+)$", line.strip())
    if m and ("proxy=\"%s\"" % proxy) in m.group(1) and ("direction=\"%s\"" % stream) in m.group(1):
        n += float(m.group(2))
print(int(n))' "$1" "${2:-downstream}" || jo_die "toxiproxy: cannot read its metrics"
}
toxi_enable() { jo_toxi_call POST "/proxies/$1" '{"enabled":true}' >/dev/null; }

# ---------------------------------------------------------------- network presets

# The benchmarks' networks: every bench script takes --net PRESET and runs
# jfsops and its peer through the same Toxiproxy proxies.
#   loopback      the servers on 127.0.0.1 as they are (no proxy)
#   region        S3: +15 ms per request, 50 MiB/s per connection each way;
#                 metadata (Redis, SQL, etcd): +1 ms per request
#   cross-region  S3: +60 ms per request, 20 MiB/s per connection each way;
#                 metadata: +1 ms
# The latency is a Toxiproxy latency toxic on the replies (downstream), so
# a request costs one added round trip whatever its size; the bandwidth is a
# bandwidth toxic per connection in both directions (Toxiproxy's KB are
# 1000 bytes). 1 ms is Toxiproxy's smallest latency step. A new connection
# costs nothing extra here (Toxiproxy accepts at once, no TLS): on a real
# network it costs a round trip or three more, so connection counts are
# printed beside the times.
#
#   net_preset NAME           NET_NAME, NET_S3_MS, NET_S3_MIBS, NET_S3_KBS,
#                             NET_META_MS, NET_DESC (one line, for the output)
#   net_start PORT            Toxiproxy for the preset (API on PORT; nothing
#                             on loopback)
#   net_s3 NAME LISTEN [EP]   NET_ENDPOINT: what the tools are given for S3
#                             endpoint EP (default $JO_S3_ENDPOINT): EP itself
#                             on loopback, else a proxy 127.0.0.1:LISTEN
#   net_meta NAME LISTEN PORT NET_META_PORT: the port the tools use for the
#                             metadata server on PORT (a proxy unless loopback)
#   net_meta_url URL          URL with its 127.0.0.1 port replaced by the one
#                             net_meta made for it (sqlite3:// is left as is)
#   net_on / net_off          add / remove the preset's toxics on every proxy
#                             net_s3 and net_meta made (building a volume runs
#                             unshaped, the measured runs shaped)
#   net_conns NAME            connections proxy NAME accepted so far (0 on
#                             loopback: there is no proxy to count them)
#   net_limit REQUESTS CONC [BYTES]  the physical limit of a run in seconds:
#                             REQUESTS x latency / CONC + BYTES / (CONC x bandwidth)

NET_PROXIES=()          # "name kind" of every proxy made for the preset
declare -gA NET_META_PORTS=()  # upstream port -> proxy port

net_preset() {
	NET_NAME=$1
	case $1 in
	loopback) NET_S3_MS=0 NET_S3_MIBS=0 NET_META_MS=0 ;;
	region) NET_S3_MS=15 NET_S3_MIBS=50 NET_META_MS=1 ;;
	cross-region) NET_S3_MS=60 NET_S3_MIBS=20 NET_META_MS=1 ;;
	*) jo_die "--net '$1': loopback, region or cross-region" ;;
	esac
	NET_S3_KBS=$((NET_S3_MIBS * 1048576 / 1000))
	if [ "$1" = loopback ]; then
		NET_DESC="net loopback: servers on 127.0.0.1, no proxy, no added latency"
	else
		NET_DESC="net $1: S3 +${NET_S3_MS} ms per request, ${NET_S3_MIBS} MiB/s per connection each way; metadata +${NET_META_MS} ms per request (Toxiproxy)"
	fi
	export NET_NAME NET_S3_MS NET_S3_MIBS NET_S3_KBS NET_META_MS NET_DESC
}

net_start() {
	[ -n "${NET_NAME:-}" ] || jo_die "net_start: net_preset first"
	[ "$NET_NAME" = loopback ] && return 0
	JO_TOXI_LOG_LEVEL=${JO_TOXI_LOG_LEVEL:-info} start_toxiproxy "$1"
}

net_s3() {
	local name=$1 listen=$2 ep=${3:-${JO_S3_ENDPOINT:-}}
	[ -n "$ep" ] || jo_die "net_s3: no endpoint"
	if [ "$NET_NAME" = loopback ]; then
		NET_ENDPOINT=$ep
		return 0
	fi
	toxi_s3 "$name" "$listen" "$ep"
	NET_PROXIES+=("$name s3")
	NET_ENDPOINT=http://127.0.0.1:$listen
}

net_meta() {
	local name=$1 listen=$2 up=$3
	if [ "$NET_NAME" = loopback ]; then
		NET_META_PORT=$up
		return 0
	fi
	toxi_proxy "$name" "$listen" "$up"
	NET_PROXIES+=("$name meta")
	NET_META_PORTS[$up]=$listen
	NET_META_PORT=$listen
}

net_meta_url() {
	local url=$1 up
	for up in "${!NET_META_PORTS[@]}"; do
		case $url in *"127.0.0.1:$up"*)
			echo "${url/127.0.0.1:$up/127.0.0.1:${NET_META_PORTS[$up]}}"
			return 0 ;;
		esac
	done
	echo "$url"
}

net_on() {
	local p name kind
	for p in "${NET_PROXIES[@]}"; do
		read -r name kind <<<"$p"
		if [ "$kind" = s3 ]; then
			toxi_latency "$name" net_latency "$NET_S3_MS" 0 downstream
			toxi_bandwidth "$name" net_bw_down "$NET_S3_KBS" downstream
			toxi_bandwidth "$name" net_bw_up "$NET_S3_KBS" upstream
		else
			toxi_latency "$name" net_latency "$NET_META_MS" 0 downstream
		fi
	done
}

net_off() {
	local p name kind
	for p in "${NET_PROXIES[@]}"; do
		read -r name kind <<<"$p"
		toxi_clear "$name"
	done
}

net_conns() {
	[ "${NET_NAME:-loopback}" = loopback ] && { echo 0; return 0; }
	grep -c "\"name\":\"$1\".*\"message\":\"Accepted client\"" "$JO_TOXI_LOG" || true
}

net_limit() {
	python3 -c '
import sys
req, conc, byts, ms, mibs = (float(x) for x in sys.argv[1:6])
t = req * ms / 1000.0 / conc
if mibs > 0:
    t += byts / (conc * mibs * 1048576.0)
print("%.2f" % t)' "$1" "$2" "${3:-0}" "$NET_S3_MS" "$NET_S3_MIBS"
}

# start_s3_shim PORT [UPSTREAM_ENDPOINT]: tests/tools/s3shim.py on 127.0.0.1:PORT.
start_s3_shim() {
	local port=$1 up=${2:-${JO_S3_ENDPOINT:-}} i
	[ -n "${JO_T:-}" ] || jo_die "start_s3_shim: call jo_setup first"
	[ -n "$up" ] || jo_die "start_s3_shim: no upstream endpoint (start_seaweed first)"
	jo_need_free_port "$port"
	local log=$JO_T/s3shim-$port.out
	"$JO_VENV/bin/python" "$JO_REPO/tests/tools/s3shim.py" --listen "$port" --upstream "$up" \
		--log "$JO_T/s3shim-$port.log" >"$log" 2>&1 &
	local pid=$!
	JO_KILL_PIDS+=("$pid")
	JO_SHIM_ENDPOINT=http://127.0.0.1:$port
	jo_wait_http "$pid" "$log" s3shim "$port" "$JO_SHIM_ENDPOINT/__shim/stats"
	export JO_SHIM_ENDPOINT
}

jo_shim_call() {
	local method=$1 path=$2 body=${3:-} out code
	[ -n "${JO_SHIM_ENDPOINT:-}" ] || jo_die "s3shim: call start_s3_shim first"
	out=$(curl -sS --max-time 10 -X "$method" ${body:+--data-binary "$body"} \
		-w '\n%{http_code}' "$JO_SHIM_ENDPOINT$path") || jo_die "s3shim $method $path: request failed"
	code=${out##*$'\n'}
	[ "$code" = 200 ] || jo_die "s3shim $method $path -> HTTP $code: ${out%$'\n'*}"
	printf '%s' "${out%$'\n'*}"
}

shim_rules() { jo_shim_call PUT /__shim/rules "$1" >/dev/null; }
shim_clear() { jo_shim_call DELETE /__shim/rules >/dev/null; }
shim_aliases() { jo_shim_call PUT /__shim/aliases "$1" >/dev/null; }
shim_stats() { jo_shim_call GET /__shim/stats; echo; }
shim_stat() {
	jo_shim_call GET /__shim/stats | "$JO_VENV/bin/python" -c '
import json, sys
v = json.load(sys.stdin)
for p in sys.argv[1].split("."):
    v = v.get(p, 0) if isinstance(v, dict) else 0
print(v)' "$1"
}
