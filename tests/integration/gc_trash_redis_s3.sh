#!/usr/bin/env bash
# jfsops gc with TrashDays 1 (redis + s3), under ASan: delayed slices and trash
# entries (plain files, shared slices, a hard link, a symlink, an xattr, a
# removed tree) kept while young, reclaimed once old; the counters and the
# bucket agree with the metadata after. Then workers beside a mount that
# runs its own background jobs.
# run_all: asan
. "$(dirname "$0")/lib/init.sh" gc
start_redis "${JO_GC_REDIS_PORT:-$JO_PORT_BASE}"
start_seaweed "${JO_GC_SEAWEED_PORT:-$((JO_PORT_BASE + 10))}"
s3_mkbucket gct
s3_mkbucket gcb
gc_run_trash "redis://127.0.0.1:$JO_REDIS_PORT/1" "$JO_S3_ENDPOINT/gct" gcredt
gc_run_beside_client "redis://127.0.0.1:$JO_REDIS_PORT/2" "$JO_S3_ENDPOINT/gcb" gcredb
echo "gc_trash_redis_s3: ok"
