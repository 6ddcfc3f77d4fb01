#!/usr/bin/env bash
# --help of every command in `jfsops --list-commands`: one-line summary (the
# command table's), every option of the source's struct option table
# documented with its default, 2+ real examples whose flags the command
# accepts; `jfsops help CMD` == `jfsops CMD --help`. See tests/tools/helpcheck.py.
# And the names the binary answers to: a `jfsops-gc` link is `jfsops gc`, a
# copy under another name (`jfsops-old`) is plain `jfsops`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BIN=${JFSOPS_BIN:-$repo/build/jfsops}
[ -x "$BIN" ] || { echo "FATAL: $BIN missing (set JFSOPS_BIN)" >&2; exit 1; }
d=$(mktemp -d "${TMPDIR:-/tmp}/jo-help.XXXXXX")
trap 'rm -rf "$d"' EXIT
cp "$BIN" "$d/jfsops-old"
ln -s jfsops-old "$d/jfsops-gc"
[ "$("$d/jfsops-old" --version)" = "$("$BIN" --version)" ] ||
	{ echo "FAIL: a copy named jfsops-old is not jfsops" >&2; exit 1; }
cmp -s <("$d/jfsops-gc" --help) <("$BIN" gc --help) ||
	{ echo "FAIL: the link jfsops-gc is not jfsops gc" >&2; exit 1; }
python3 "$repo/tests/tools/helpcheck.py" "$repo" "$BIN"
