#!/usr/bin/env bash
# jfsops info/cat on a sqlite3 + file volume: lz4, 256 KiB blocks, hash prefix, trash off.
# run_all: asan
. "$(dirname "$0")/lib/init.sh" infocat
META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_T/bucket" icsqllz4 --compress lz4 --block-size 256K --hash-prefix --trash-days 0
ic_run_variant "$META" "$JO_T/mnt" $((256 << 10)) 0
