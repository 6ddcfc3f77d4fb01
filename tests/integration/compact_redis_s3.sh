#!/usr/bin/env bash
# jfsops compact on redis + s3 (SeaweedFS) volumes (lz4), trash off and on.
. "$(dirname "$0")/lib/init.sh" compact
start_redis $((JO_PORT_BASE + 0))
start_seaweed $((JO_PORT_BASE + 10))
compact_run_variant "redis://127.0.0.1:$JO_REDIS_PORT/3" "$JO_S3_ENDPOINT/cpredis0" cpredis0 0 --compress lz4
compact_run_variant "redis://127.0.0.1:$JO_REDIS_PORT/4" "$JO_S3_ENDPOINT/cpredis1" cpredis1 1 --compress lz4 --hash-prefix
echo "compact_redis_s3: ok"
