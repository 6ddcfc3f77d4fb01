#!/usr/bin/env bash
# jfsops leakcheck on every engine of JO_ENGINES (default: PostgreSQL,
# MariaDB and etcd): exactly the planted leaks found (as juicefs gc counts them), the
# removed block reported missing, --delete-from with quarantine and
# --restore, fsck clean after.
. "$(dirname "$0")/lib/init.sh" engines leakcheck
lk_on() { # ENGINE
	engine_new "$1" "lk-$1"
	jfs_format "$JO_META" "$JO_BUCKET" "lk-$1" --block-size 1M --trash-days 0
	lk_run_variant "$JO_META" "$JO_STORE"
}
engine_each engines_leakcheck lk_on
