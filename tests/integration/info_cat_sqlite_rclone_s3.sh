#!/usr/bin/env bash
# jfsops info/cat on a sqlite3 + s3 volume served by rclone serve s3: zstd, hash prefix, trash 1 day.
. "$(dirname "$0")/lib/init.sh" infocat
start_rclone_s3 $((JO_PORT_BASE + 20))
s3_mkbucket icrcl "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK"
META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_RS3_ENDPOINT/icrcl" icrclone --access-key "$JO_RS3_AK" --secret-key "$JO_RS3_SK" --compress zstd --hash-prefix --trash-days 1
ic_run_variant "$META" "$JO_T/mnt" $((4 << 20)) 1
