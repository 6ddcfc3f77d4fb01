#!/usr/bin/env bash
# jfsops info/cat on every engine of JO_ENGINES (default: PostgreSQL, MariaDB
# and etcd; any of redis sqlite3 postgres mysql etcd): a volume made
# by the real juicefs, fragmented files written through a mount, byte-exact
# reads of every range shape, read-only commands change nothing.
# run_all: asan
. "$(dirname "$0")/lib/init.sh" engines infocat
ic_on() { # ENGINE
	engine_new "$1" "ic-$1"
	jfs_format "$JO_META" "$JO_BUCKET" "ic-$1" --trash-days 1
	ic_run_variant "$JO_META" "$JO_T/mnt-$1" $((4 << 20)) 1
}
engine_each engines_cat ic_on
