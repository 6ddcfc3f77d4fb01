#!/usr/bin/env bash
# jfsops gc with TrashDays 1 on every engine of JO_ENGINES (default:
# PostgreSQL, MariaDB and etcd), under ASan: delayed slices and trash entries of
# every shape kept while young and reclaimed once old, counters and bucket
# agree with the metadata after; then workers beside a mount that runs its
# own background jobs.
# run_all: asan
. "$(dirname "$0")/lib/init.sh" engines gc
gc_trash_on() { # ENGINE
	engine_new "$1" "gct-$1"
	gc_run_trash "$JO_META" "$JO_BUCKET" "gct-$1"
	engine_new "$1" "gcb-$1"
	gc_run_beside_client "$JO_META" "$JO_BUCKET" "gcb-$1"
}
engine_each engines_gc_trash gc_trash_on
