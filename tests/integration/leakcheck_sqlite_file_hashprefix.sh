#!/usr/bin/env bash
# jfsops leakcheck on a sqlite3 + file volume: hash prefix, 4 MiB blocks, trash 1 day.
export JO_PORT_BASE=${JO_PORT_BASE:-9400}
. "$(dirname "$0")/lib/init.sh" leakcheck
META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_T/objs" lkhp --hash-prefix --trash-days 1
lk_run_variant "$META" "file:$JO_T/objs"
