# shellcheck shell=bash
# warmup_lib.bash: set-up and helpers shared by the warmup_*.sh integration
# tests. Source after tests/lib/services.sh and jo_setup: starts Redis and
# SeaweedFS on the warmup ports (Redis JO_PORT_BASE, SeaweedFS JO_PORT_BASE+10
# unless JO_WARMUP_REDIS_PORT / JO_WARMUP_SEAWEED_BASE say otherwise: ports
# of their own, so two of these scripts in two lanes of tests/run_all.sh
# never meet), formats volume "wvol" (1 MiB blocks) as $META.

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# JO_WARMUP_ENGINE (default redis): the metadata engine of the volume, any
# engine of tests/lib/engines.sh (engines_warmup.sh runs the scenario on each)
if [ "${JO_WARMUP_ENGINE:-redis}" = redis ]; then
	start_redis "${JO_WARMUP_REDIS_PORT:-$JO_PORT_BASE}"
	META=redis://127.0.0.1:$JO_REDIS_PORT/1
else
	# shellcheck source=../lib/engines.sh
	. "$JO_REPO/tests/lib/engines.sh"
	engine_start "$JO_WARMUP_ENGINE"
	engine_meta "$JO_WARMUP_ENGINE" warmup1
	META=$JO_META
fi
start_seaweed "${JO_WARMUP_SEAWEED_BASE:-$((JO_PORT_BASE + 10))}"
s3_mkbucket warmup1
jfs_format "$META" "$JO_S3_ENDPOINT/warmup1" wvol --trash-days 0 --block-size 1M

# mount_at MP CACHEDIR [flags...]: like jfs_mount, with a chosen cache dir.
NPORT=0
mount_at() {
	local mp=$1 cache=$2 port
	shift 2
	while :; do
		port=$((JO_PORT_BASE + 30 + NPORT))
		NPORT=$((NPORT + 1))
		[ $NPORT -le 20 ] || jo_die "out of metrics ports"
		jo_port_busy "$port" || break
	done
	mkdir -p "$mp" "$cache"
	local log=$JO_T/mount-$NPORT.log
	"$JUICEFS" mount -d --no-agent --no-usage-report --backup-meta 0 --cache-dir "$cache" \
		--cache-size 1024 --metrics "127.0.0.1:$port" --log "$log" "$@" "$META" "$mp" \
		>"$log.out" 2>&1 || { jo_tail "$log.out"; jo_tail "$log"; jo_die "mount $mp failed"; }
	JO_MOUNTS+=("$mp")
	mountpoint -q "$mp" || jo_die "$mp is not a mount point"
}

# stat_get MP NAME: a counter of MP/.stats (0 when absent), summed.
stat_get() {
	awk -v n="$2" '$1 == n { s += $2 } END { printf "%d\n", s }' "$1/.stats"
}
gets() { stat_get "$1" juicefs_object_request_durations_histogram_seconds_GET_total; }
getbytes() { stat_get "$1" juicefs_object_request_data_bytes_GET; }

# cached_keys CACHEDIR: block keys in a client cache dir, as "chunks/...".
cached_keys() {
	(cd "$1" && find . -path '*/raw/chunks/*' -type f | sed 's#^\./[^/]*/raw/##' | sort)
}
