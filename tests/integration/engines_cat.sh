#!/usr/bin/env bash
# jfsops info/cat on every engine of JO_ENGINES (default: PostgreSQL, MariaDB
# and etcd; any of redis sqlite3 postgres mysql etcd): a volume made
# by the real juicefs, fragmented files written through a mount, byte-exact
# reads of every range shape, read-only commands change nothing.
# run_all: asan
. "$(dirname "$0")/lib/init.sh" engines infocat
JO_ENGINES=${JO_ENGINES:-postgres mysql etcd}
for e in $(engine_list); do
	engine_start "$e"
	engine_meta "$e" "ic_$e"
	engine_store "$e" "ic-$e"
	jfs_format "$JO_META" "$JO_BUCKET" "ic-$e" --trash-days 1
	ic_run_variant "$JO_META" "$JO_T/mnt-$e" $((4 << 20)) 1
	echo "engines_cat: $e ok" >&2
done
echo "engines_cat: ok"
