#!/usr/bin/env bash
# jfsops leakcheck on every engine of JO_ENGINES (default: PostgreSQL,
# MariaDB and etcd): exactly the planted leaks found (as juicefs gc counts them), the
# removed block reported missing, --delete-from with quarantine and
# --restore, fsck clean after.
. "$(dirname "$0")/lib/init.sh" engines leakcheck
JO_ENGINES=${JO_ENGINES:-postgres mysql etcd}
for e in $(engine_list); do
	engine_start "$e"
	engine_meta "$e" "lk_$e"
	engine_store "$e" "lk-$e"
	jfs_format "$JO_META" "$JO_BUCKET" "lk-$e" --block-size 1M --trash-days 0
	lk_run_variant "$JO_META" "$JO_STORE"
	echo "engines_leakcheck: $e ok" >&2
done
echo "engines_leakcheck: ok"
