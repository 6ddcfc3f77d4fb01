#!/usr/bin/env bash
# jfsops lance on a dataset inside a JuiceFS volume (META-URL:/path, read
# through the metadata engine and the object store, no mount): copied in with
# `juicefs sync` (no FUSE), the output must equal the output for the local copy
# for every version and format, and errors must name the volume path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"

# envelope_off: JSON lines as they are, but a summary without the fields of
# the run's envelope (version, volume, complete, exit, elapsed_s, started,
# finished), which are the run's, not the dataset's; CSV passes unchanged
envelope_off() {
	python3 -c '
import json, sys
for l in sys.stdin:
    if l.startswith("{"):
        o = json.loads(l)
        if o.get("type") == "summary":
            for k in ("version", "volume", "complete", "exit", "elapsed_s", "started", "finished"):
                o.pop(k, None)
            l = json.dumps(o, sort_keys=True) + "\n"
    sys.stdout.write(l)
'
}
jo_setup
PY="$JO_VENV/bin/python"
J="$JO_BIN"
"$PY" "$JO_REPO/tests/lance/make_datasets.py" "$JO_T/ds" --small > "$JO_T/datasets.jsonl" 2>"$JO_T/make.log" ||
	{ jo_tail "$JO_T/make.log"; jo_die "make_datasets.py failed"; }
META="sqlite3://$JO_T/meta.db"
"$JUICEFS" format "$META" lancevol --storage file --bucket "$JO_T/bucket/" >"$JO_T/format.log" 2>&1 ||
	{ jo_tail "$JO_T/format.log"; jo_die "juicefs format failed"; }
export JO_LANCE_META="$META"
fails=0
for d in "$JO_T"/ds/ds_*; do
	name=$(basename "$d")
	"$JUICEFS" sync "$d/" "jfs://JO_LANCE_META/sets/$name/" >"$JO_T/sync.log" 2>&1 ||
		{ jo_tail "$JO_T/sync.log"; jo_die "juicefs sync $name failed"; }
	for v in $("$J" lance "$d" --list-versions | tail -n +2 | cut -d, -f1); do
		cols=i,s,st,l,vec; [ "$name" = ds_blob_v2 ] && cols=id,blob
		for fmt in csv jsonl; do
			# the summary's envelope (times, the volume's name) is the run's own,
			# not the dataset's: every range and counter must be the same
			"$J" lance -q "$d" --version "$v" --columns "$cols" --format "$fmt" | envelope_off > "$JO_T/local"
			"$J" lance -q "$META:/sets/$name" --version "$v" --columns "$cols" --format "$fmt" |
				envelope_off > "$JO_T/vol"
			if cmp -s "$JO_T/local" "$JO_T/vol"; then
				echo "ok   $name v$v $fmt"
			else
				echo "FAIL $name v$v $fmt: volume output differs"; diff "$JO_T/local" "$JO_T/vol" | head -5
				fails=$((fails + 1))
			fi
		done
	done
	cmp -s <("$J" lance "$d" --list-versions) <("$J" lance "$META:/sets/$name" --list-versions) ||
		{ echo "FAIL $name --list-versions differs"; fails=$((fails + 1)); }
done
"$J" lance -q "$META:/sets/ds_blob_v2" --columns blob --blobs > "$JO_T/blobs"
grep -q '\.blob,0,6000000$' "$JO_T/blobs" || { echo "FAIL blob v2 sidecars not listed in the volume"; fails=$((fails + 1)); }
rc=0; "$J" lance "$META:/sets/nope" --columns i 2>"$JO_T/err" || rc=$?
{ [ "$rc" = 8 ] && grep -q "does not exist in the volume" "$JO_T/err"; } ||
	{ echo "FAIL missing dataset in volume: exit $rc $(cat "$JO_T/err")"; fails=$((fails + 1)); }
[ "$fails" = 0 ] || jo_die "lance_jfs: $fails checks failed"
echo "lance_jfs: ok"
