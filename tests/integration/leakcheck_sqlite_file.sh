#!/usr/bin/env bash
# jfsops leakcheck on a sqlite3 + file volume: 1 MiB blocks, trash off;
# then symlinks under chunks/ (foreign, never followed or deleted) and a
# bucket directory that is gone (exit 8).
export JO_PORT_BASE=${JO_PORT_BASE:-9400}
. "$(dirname "$0")/lib/init.sh" leakcheck
META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_T/objs" lkvol --block-size 1M --trash-days 0
lk_run_variant "$META" "file:$JO_T/objs"
lk_symlinks
