#!/usr/bin/env bash
# meta_sqlite.sh: common/meta against a real SQLite volume made by juicefs.
#   BUILD=/path/to/build tests/integration/meta_sqlite.sh
set -euo pipefail
T=$(mktemp -d /tmp/jo-meta-sqlite.XXXXXX)
source "$(dirname "$0")/meta_lib.sh"
trap 'meta_cleanup; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
META="sqlite3://$T/m.db"

# error paths: missing file is not created; a non-JuiceFS db is ENOTJFS
build_driver
if "$T/meta_dump" "sqlite3://$T/missing.db" >/dev/null 2>"$T/err"; then echo "FAIL: missing db opened"; exit 1; fi
grep -q ENOTFOUND "$T/err" || { echo "FAIL: missing db: $(cat "$T/err")"; exit 1; }
[ ! -e "$T/missing.db" ] || { echo "FAIL: missing db was created"; exit 1; }
sqlite3 "$T/other.db" "create table t(x)"
if "$T/meta_dump" "sqlite3://$T/other.db" >/dev/null 2>"$T/err"; then echo "FAIL: non-jfs db opened"; exit 1; fi
grep -q ENOTJFS "$T/err" || { echo "FAIL: non-jfs db: $(cat "$T/err")"; exit 1; }

run_scenario
# SQLite-specific: after `||` appends slices may be TEXT; we must still see all bytes
echo "meta_sqlite: PASS"
