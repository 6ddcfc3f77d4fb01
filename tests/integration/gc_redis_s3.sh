#!/usr/bin/env bash
# jfsops gc on redis + s3 (SeaweedFS) volumes: 4 parallel workers; workers
# killed with SIGKILL and restarted; one slice count unreadable in a batch. Ports: JO_GC_REDIS_PORT (default
# JO_PORT_BASE) and JO_GC_SEAWEED_PORT (default JO_PORT_BASE+10).
. "$(dirname "$0")/lib/init.sh" gc
start_redis "${JO_GC_REDIS_PORT:-$JO_PORT_BASE}"
start_seaweed "${JO_GC_SEAWEED_PORT:-$((JO_PORT_BASE + 10))}"
s3_mkbucket gcp
s3_mkbucket gck
s3_mkbucket gcb
gc_run_parallel "redis://127.0.0.1:$JO_REDIS_PORT/1" "$JO_S3_ENDPOINT/gcp" gcredp
JO_GC_FILES=${JO_GC_KILL_FILES:-600} gc_run_killed "redis://127.0.0.1:$JO_REDIS_PORT/2" "$JO_S3_ENDPOINT/gck" gcredk
gc_bad_ref "redis://127.0.0.1:$JO_REDIS_PORT/3" "$JO_S3_ENDPOINT/gcb" gcredb
echo "gc_redis_s3: ok"
