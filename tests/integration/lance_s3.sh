#!/usr/bin/env bash
# jfsops lance on s3:// datasets (SeaweedFS): the ranges are exactly those
# of the same dataset read from a local directory, for every format, every
# version and a dataset of many fragments (the data-file tails are read
# ahead by several threads on an object store, one after another on a
# local directory); a missing dataset is one error line.
. "$(dirname "$0")/lib/init.sh"
PY="$JO_VENV/bin/python"
J="$JO_BIN"
start_seaweed $((JO_PORT_BASE + 10)) lanceak lancesecret
s3_mkbucket lances3
"$PY" "$JO_REPO/tests/lance/make_datasets.py" "$JO_T/ds" --small >"$JO_T/datasets.jsonl" 2>"$JO_T/make.log" ||
	{ jo_tail "$JO_T/make.log"; jo_die "make_datasets.py failed"; }
# many fragments: more than the read-ahead window (64) and its threads (16)
"$PY" - "$JO_T/ds/many" <<'PYEOF' 2>>"$JO_T/make.log"
import sys
import pyarrow as pa, lance
n = 300
t = pa.table({"id": pa.array(range(n * 2), pa.int64()),
              "s": pa.array(["row %d" % i for i in range(n * 2)])})
lance.write_dataset(t, sys.argv[1], data_storage_version="2.1", max_rows_per_file=2,
                    max_rows_per_group=2)
assert len(lance.dataset(sys.argv[1]).get_fragments()) == n
PYEOF
export RCLONE_CONFIG=/dev/null RCLONE_CONFIG_SW_TYPE=s3 RCLONE_CONFIG_SW_PROVIDER=Other
export RCLONE_CONFIG_SW_ACCESS_KEY_ID=lanceak RCLONE_CONFIG_SW_SECRET_ACCESS_KEY=lancesecret
export RCLONE_CONFIG_SW_ENDPOINT=$JO_S3_ENDPOINT RCLONE_CONFIG_SW_FORCE_PATH_STYLE=true
"$RCLONE" -q copy --transfers 8 "$JO_T/ds" SW:lances3/ds || jo_die "uploading the datasets failed"
export JFSOPS_S3_ENDPOINT=$JO_S3_ENDPOINT JFSOPS_ACCESS_KEY=lanceak JFSOPS_SECRET_KEY=lancesecret
export JFSOPS_REGION=us-east-1

fails=0 compared=0
# the same first tail read on both sides (s3:// defaults to 64 KiB, as Lance
# reads an object store; a directory to 4 KiB)
same() { # same NAME VERSION COLUMNS
	local v=$3
	"$J" lance -q "$JO_T/ds/$1" --version "$2" --columns "$v" --tail-block 65536 >"$JO_T/local.csv" ||
		{ echo "FAIL $1 v$2: local read failed"; fails=$((fails + 1)); return; }
	if ! "$J" lance -q "s3://lances3/ds/$1" --version "$2" --columns "$v" >"$JO_T/s3.csv" 2>"$JO_T/s3.err"; then
		echo "FAIL $1 v$2: s3 read failed: $(cat "$JO_T/s3.err")"; fails=$((fails + 1)); return
	fi
	if cmp -s "$JO_T/local.csv" "$JO_T/s3.csv"; then
		compared=$((compared + 1))
	else
		echo "FAIL $1 v$2 --columns $v: s3:// ranges differ from the local ones"
		diff "$JO_T/local.csv" "$JO_T/s3.csv" | head -5 || true
		fails=$((fails + 1))
	fi
}
while read -r line; do
	name=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$line")
	cols=$("$PY" -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["columns"]))' "$line")
	for v in $("$PY" -c 'import json,sys; print(" ".join(map(str, json.loads(sys.argv[1])["versions"])))' "$line"); do
		# every column of the newest schema may not exist in old versions: take those of that version
		vc=$("$J" lance "$JO_T/ds/$name" --version "$v" --schema |
			"$PY" -c 'import csv, sys
want = sys.argv[1].split(",")
top = [r["path"] for r in csv.DictReader(sys.stdin) if r["parent_id"] == "-1"]
print(",".join(c for c in want if c in top))' "$cols")
		[ -n "$vc" ] || jo_die "$name v$v: no column of $cols in its schema"
		same "$name" "$v" "$vc"
	done
done <"$JO_T/datasets.jsonl"
same many 1 id,s
lines=$(wc -l <"$JO_T/s3.csv")
if [ "$lines" -gt 300 ]; then echo "ok   many fragments: $lines ranges"; else
	echo "FAIL many fragments: only $lines ranges"; fails=$((fails + 1)); fi
[ "$compared" -ge 10 ] || { echo "FAIL only $compared comparisons ran"; fails=$((fails + 1)); }
echo "ok   $compared dataset versions read from s3:// with the local ranges"

rc=0
"$J" lance -q "s3://lances3/ds/nosuch" --columns id >/dev/null 2>"$JO_T/err" || rc=$?
if [ "$rc" != 0 ] && [ "$(wc -l <"$JO_T/err")" = 1 ]; then echo "ok   missing s3 dataset: exit $rc, one line"; else
	echo "FAIL missing s3 dataset: exit $rc, stderr:"; cat "$JO_T/err"; fails=$((fails + 1)); fi

[ "$fails" = 0 ] || jo_die "$fails failures"
echo "lance_s3: ok"
