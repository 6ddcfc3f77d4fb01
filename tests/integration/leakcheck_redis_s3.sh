#!/usr/bin/env bash
# jfsops leakcheck on a redis + s3 (SeaweedFS) volume: hash prefix, 1 MiB
# blocks, trash 1 day; a bucket that does not exist is exit 8 (one line, no
# report); then the object store goes away: the run must fail without a
# report.
export JO_PORT_BASE=${JO_PORT_BASE:-9400}
. "$(dirname "$0")/lib/init.sh" leakcheck
start_redis "${LK_REDIS_PORT:-$((JO_PORT_BASE + 0))}"
start_seaweed "${LK_WEED_BASE:-$((JO_PORT_BASE + 10))}"
s3_mkbucket lkrs
META="redis://127.0.0.1:$JO_REDIS_PORT/3"
jfs_format "$META" "$JO_S3_ENDPOINT/lkrs" lkrs --block-size 1M --hash-prefix --trash-days 1
lk_run_variant "$META" "s3:lkrs"
lk_missing_bucket "$META" --bucket "$JO_S3_ENDPOINT/nosuchbucket"
kill -TERM "$JO_SEAWEED_PID"
wait "$JO_SEAWEED_PID" 2>/dev/null || true
lk_listing_error "$META"
