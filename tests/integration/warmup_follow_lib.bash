# shellcheck shell=bash
# warmup_follow_lib.bash: set-up shared by warmup_follow.sh and
# warmup_check_evict.sh. Source after tests/lib/services.sh and jo_setup:
# starts Redis (JO_PORT_BASE+0) and SeaweedFS (JO_PORT_BASE+10..13) unless
# JO_FOLLOW_REDIS_PORT / JO_FOLLOW_SEAWEED_BASE say otherwise, formats volume
# "fvol" (256 KiB blocks, so a Lance data file spans several) as $META.

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

PY=$JO_VENV/bin/python
start_redis "${JO_FOLLOW_REDIS_PORT:-$JO_PORT_BASE}"
start_seaweed "${JO_FOLLOW_SEAWEED_BASE:-$((JO_PORT_BASE + 10))}"
s3_mkbucket follow1
META=redis://127.0.0.1:$JO_REDIS_PORT/1
jfs_format "$META" "$JO_S3_ENDPOINT/follow1" fvol --trash-days 0 --block-size 256K
BS=262144

# stat_get MP NAME: a counter of MP/.stats (0 when absent), summed.
stat_get() {
	awk -v n="$2" '$1 == n { s += $2 } END { printf "%d\n", s }' "$1/.stats"
}

# cache_sampler MP OUT: every 20 ms, append the mount's cached bytes to OUT
# (until killed). Prints its pid.
cache_sampler() {
	(
		while :; do
			stat_get "$1" juicefs_blockcache_bytes >>"$2" 2>/dev/null || true
			sleep 0.02
		done
	) >/dev/null 2>&1 &
	echo $!
}

# cached_keys CACHEDIR: block keys in a client cache dir, as "chunks/..."
# (read-only: the test's own oracle of what the mount holds).
cached_keys() {
	(cd "$1" && find . -path '*/raw/chunks/*' -type f | sed 's#^\./[^/]*/raw/##' | sort)
}
