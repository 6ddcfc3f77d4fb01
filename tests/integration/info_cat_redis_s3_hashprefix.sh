#!/usr/bin/env bash
# jfsops info/cat on a redis + s3 (SeaweedFS) volume: lz4, 1 MiB blocks, hash prefix, trash off.
. "$(dirname "$0")/lib/init.sh" infocat
start_redis "$JO_PORT_BASE"
start_seaweed $((JO_PORT_BASE + 10))
s3_mkbucket ichp
META="redis://127.0.0.1:$JO_REDIS_PORT/2"
jfs_format "$META" "$JO_S3_ENDPOINT/ichp" ichp --compress lz4 --block-size 1M --hash-prefix --trash-days 0
ic_run_variant "$META" "$JO_T/mnt" $((1 << 20)) 0
