#!/usr/bin/env bash
# jfsops info/cat on a redis + s3 (SeaweedFS) volume: zstd, 4 MiB blocks, trash 1 day.
. "$(dirname "$0")/lib/init.sh" infocat
start_redis "$JO_PORT_BASE"
start_seaweed $((JO_PORT_BASE + 10))
s3_mkbucket iczstd
META="redis://127.0.0.1:$JO_REDIS_PORT/1"
jfs_format "$META" "$JO_S3_ENDPOINT/iczstd" iczstd --compress zstd --trash-days 1
ic_run_variant "$META" "$JO_T/mnt" $((4 << 20)) 1
