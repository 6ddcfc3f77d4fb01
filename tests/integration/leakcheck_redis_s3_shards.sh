#!/usr/bin/env bash
# jfsops leakcheck on a redis + s3 (SeaweedFS) volume with 3 shards, trash off.
export JO_PORT_BASE=${JO_PORT_BASE:-9400}
. "$(dirname "$0")/lib/init.sh" leakcheck
start_redis "${LK_REDIS_PORT:-$((JO_PORT_BASE + 0))}"
start_seaweed "${LK_WEED_BASE:-$((JO_PORT_BASE + 10))}"
for i in 0 1 2; do s3_mkbucket "lksh-$i"; done
META="redis://127.0.0.1:$JO_REDIS_PORT/4"
jfs_format "$META" "$JO_S3_ENDPOINT/lksh-%d" lksh --shards 3 --trash-days 0
lk_run_variant "$META" "s3:lksh-%d:3"
