#!/usr/bin/env bash
# The README's first command: install what jfsops needs, build it, make a
# local JuiceFS volume with the real `juicefs` (SQLite metadata + file
# storage), write files into it, then run `jfsops info` and `jfsops cat`.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash tests/install.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
JFS=$top/.venv/bin/juicefs
JO=$top/build/jfsops
D=${JFSOPS_DEMO_DIR:-$top/demo}
rm -rf "$D"
mkdir -p "$D/src/logs" "$D/objects"
META="sqlite3://$D/meta.db"

# a few files: text, a 9 MiB binary (3 blocks of 4 MiB at most), an empty one
seq 1 20000 > "$D/src/logs/numbers.txt"
head -c 9437184 /dev/urandom > "$D/src/blob.bin"
: > "$D/src/empty"
"$JFS" format "$META" demo --storage file --bucket "$D/objects" --compress lz4 \
	--trash-days 0 --no-agent >"$D/format.log" 2>&1
DEMO_META=$META "$JFS" sync "$D/src/" jfs://DEMO_META/ --no-agent >"$D/sync.log" 2>&1

echo "== jfsops info $META"
"$JO" info "$META"
echo
echo "== jfsops cat $META /logs/numbers.txt | tail -n 3"
"$JO" cat "$META" /logs/numbers.txt | tail -n 3
echo
want=$(sha256sum < "$D/src/blob.bin" | cut -d' ' -f1)
got=$("$JO" cat "$META" /blob.bin | sha256sum | cut -d' ' -f1)
echo "== sha256 of /blob.bin: source $want, jfsops cat $got"
[ "$want" = "$got" ] || { echo "demo: MISMATCH" >&2; exit 1; }
echo
echo "The demo volume stays in $D; try: $JO info $META --json"
