#!/usr/bin/env bash
# jfsops info/cat on a redis + s3 (SeaweedFS) volume sharded over 3 buckets (jfs-%d), no compression, 512 KiB blocks, trash 1 day.
# run_all: asan
. "$(dirname "$0")/lib/init.sh" infocat
start_redis "$JO_PORT_BASE"
start_seaweed $((JO_PORT_BASE + 10))
for i in 0 1 2; do s3_mkbucket "icsh-$i"; done
META="redis://127.0.0.1:$JO_REDIS_PORT/3"
jfs_format "$META" "$JO_S3_ENDPOINT/icsh-%d" icshards --shards 3 --block-size 512K --trash-days 1
ic_run_variant "$META" "$JO_T/mnt" $((512 << 10)) 1
