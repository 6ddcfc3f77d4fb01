#!/usr/bin/env bash
# jfsops gc on sqlite3 + file volumes: 4 parallel workers; workers killed
# with SIGKILL and restarted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/lib/gc.sh"
jo_setup
gc_run_parallel "sqlite3://$JO_T/p.db" "$JO_T/bucketp" gcsqlp
JO_GC_FILES=${JO_GC_KILL_FILES:-600} gc_run_killed "sqlite3://$JO_T/k.db" "$JO_T/bucketk" gcsqlk
gc_run_signals "sqlite3://$JO_T/s.db" "$JO_T/buckets" gcsqls
gc_check_refusals "sqlite3://$JO_T/s.db"
echo "gc_sqlite_file: ok"
