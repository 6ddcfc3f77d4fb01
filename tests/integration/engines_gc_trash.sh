#!/usr/bin/env bash
# jfsops gc with TrashDays 1 on every engine of JO_ENGINES (default:
# PostgreSQL, MariaDB and etcd), under ASan: delayed slices and trash entries of
# every shape kept while young and reclaimed once old, counters and bucket
# agree with the metadata after; then workers beside a mount that runs its
# own background jobs.
# run_all: asan
. "$(dirname "$0")/lib/init.sh" engines gc
JO_ENGINES=${JO_ENGINES:-postgres mysql etcd}
for e in $(engine_list); do
	engine_start "$e"
	engine_meta "$e" "gct_$e"
	engine_store "$e" "gct-$e"
	gc_run_trash "$JO_META" "$JO_BUCKET" "gct-$e"
	engine_meta "$e" "gcb_$e"
	engine_store "$e" "gcb-$e"
	gc_run_beside_client "$JO_META" "$JO_BUCKET" "gcb-$e"
	echo "engines_gc_trash: $e ok" >&2
done
echo "engines_gc_trash: ok"
