#!/usr/bin/env bash
# jfsops gc with TrashDays 1 (sqlite3 + file), under ASan: delayed slices and trash
# entries (plain files, shared slices, a hard link, a symlink, an xattr, a
# removed tree) kept while young, reclaimed once old; the counters and the
# bucket agree with the metadata after. Then workers beside a mount that
# runs its own background jobs.
# run_all: asan
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/lib/gc.sh"
jo_setup
gc_run_trash "sqlite3://$JO_T/t.db" "$JO_T/buckett" gcsqlt
gc_run_beside_client "sqlite3://$JO_T/b.db" "$JO_T/bucketb" gcsqlb
echo "gc_trash_sqlite_file: ok"
