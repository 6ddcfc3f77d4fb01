#!/usr/bin/env bash
# --help of every command in `jfsops --list-commands`: one-line summary (the
# command table's), every option of the source's struct option table
# documented with its default, 2+ real examples whose flags the command
# accepts; `jfsops help CMD` == `jfsops CMD --help`. See tests/tools/helpcheck.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BIN=${JFSOPS_BIN:-$repo/build/jfsops}
[ -x "$BIN" ] || { echo "FATAL: $BIN missing (set JFSOPS_BIN)" >&2; exit 1; }
exec python3 "$repo/tests/tools/helpcheck.py" "$repo" "$BIN"
