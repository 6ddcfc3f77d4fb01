#!/usr/bin/env bash
# jfsops compact on sqlite3 + file volumes (zstd), trash off and on.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/lib/compact.sh"
jo_setup
compact_run_variant "sqlite3://$JO_T/t0.db" "$JO_T/bucket0" cpsql0 0 --compress zstd
compact_run_variant "sqlite3://$JO_T/t1.db" "$JO_T/bucket1" cpsql1 1 --compress zstd --block-size 1M
echo "compact_sqlite_file: ok"
