#!/usr/bin/env bash
# jfsops info/cat on a sqlite3 + file volume: no compression, 4 MiB blocks, trash 1 day.
. "$(dirname "$0")/lib/init.sh" infocat
META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_T/bucket" icsqlfile --trash-days 1
ic_run_variant "$META" "$JO_T/mnt" $((4 << 20)) 1
