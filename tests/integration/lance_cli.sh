#!/usr/bin/env bash
# jfsops lance: output formats, --align, --prefix, --list-versions, --schema,
# --help, --blobs, and bad input (corrupt/truncated manifest or data file,
# unknown column, missing version, not a Lance directory): one error line,
# a distinct exit code, never a crash.
. "$(dirname "$0")/lib/init.sh"
PY="$JO_VENV/bin/python"
J="$JO_BIN"
"$PY" "$JO_REPO/tests/lance/make_datasets.py" "$JO_T/ds" --small > "$JO_T/datasets.jsonl" 2>"$JO_T/make.log" ||
	{ jo_tail "$JO_T/make.log"; jo_die "make_datasets.py failed"; }
D="$JO_T/ds/ds_2.1"
fails=0
check() { # check NAME CONDITION...
	local name=$1; shift
	if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
# expect_err NAME CODE PATTERN CMD...: exit CODE, exactly one stderr line matching PATTERN.
expect_err() {
	local name=$1 code=$2 pat=$3 rc=0; shift 3
	"$@" >"$JO_T/out" 2>"$JO_T/err" || rc=$?
	if [ "$rc" = "$code" ] && [ "$(wc -l < "$JO_T/err")" = 1 ] && grep -q -- "$pat" "$JO_T/err"; then
		echo "ok   $name (exit $rc: $(cat "$JO_T/err"))"
	else
		echo "FAIL $name: exit $rc (want $code), stderr:"; cat "$JO_T/err"; fails=$((fails + 1))
	fi
}

# --- formats -----------------------------------------------------------
"$J" lance -q "$D" --columns i,s > "$JO_T/csv"
check "csv header" test "$(head -1 "$JO_T/csv")" = "file,offset,length"
check "csv names the manifest" grep -q '^_versions/4.manifest,0,' "$JO_T/csv"
"$J" lance -q "$D" --columns i,s --format jsonl > "$JO_T/jsonl"
check "jsonl parses, ends with a summary" "$PY" - "$JO_T/jsonl" "$JO_T/csv" <<'PYEOF'
import json, sys, csv
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs[-1]["type"] == "summary" and recs[-1]["dataset_version"] == 4 and recs[-1]["command"] == "lance"
rs = [r for r in recs if r["type"] == "range"]
rows = list(csv.DictReader(open(sys.argv[2])))
assert [(r["file"], r["offset"], r["length"]) for r in rs] == \
       [(r["file"], int(r["offset"]), int(r["length"])) for r in rows]
assert recs[-1]["bytes"] == sum(r["length"] for r in rs)
# sorted, merged, inside the files
last = None
for r in rs:
    key = (r["file"], r["offset"])
    assert last is None or key > last, (last, key)
    if last and last[0] == r["file"]:
        assert r["offset"] > prev_end
    prev_end = r["offset"] + r["length"]
    last = key
PYEOF
"$J" lance -q "$D" --columns vec --format ranges --prefix /mnt/jfs/ds > "$JO_T/jfs"
check "ranges format: path [s-e;...]" grep -qE '^/mnt/jfs/ds/data/[01]{24}[0-9a-f]{26}\.lance \[[0-9]+-[0-9]+(;[0-9]+-[0-9]+)*\]$' "$JO_T/jfs"
check "ranges format: one line per file" test "$(cut -d' ' -f1 "$JO_T/jfs" | sort | uniq -d | wc -l)" = 0
"$J" lance -q "$D" --columns vec --format juicefs --prefix /mnt/jfs/ds > "$JO_T/jfs-plain"
check "juicefs format: only paths, the files of the ranges list" test "$(cat "$JO_T/jfs-plain")" = "$(cut -d' ' -f1 "$JO_T/jfs")"
check "juicefs format: no range brackets, no blanks" test "$(grep -c '[][ ]' "$JO_T/jfs-plain")" = 0
check "--format juicefs refused with --schema" test "$("$J" lance "$D" --schema --format juicefs >/dev/null 2>&1; echo $?)" = 2
"$J" lance -q "$D" --columns vec --align 4K --format jsonl > "$JO_T/aligned"
check "--align 4K: offsets aligned, ends aligned or EOF" "$PY" - "$JO_T/aligned" "$D" <<'PYEOF'
import json, os, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["type"] != "range":
        continue
    size = os.path.getsize(os.path.join(sys.argv[2], r["file"]))
    end = r["offset"] + r["length"]
    assert r["offset"] % 4096 == 0 and (end % 4096 == 0 or end == size), r
PYEOF
check "--list-versions (V1 names)" test "$("$J" lance "$D" --list-versions | tail -n +2 | cut -d, -f1,2 | tr '\n' ' ')" = "1,v1 2,v1 3,v1 4,v1 "
check "--list-versions (V2 names)" grep -q '^1,v2,_versions/18446744073709551614.manifest$' <("$J" lance "$JO_T/ds/ds_2.2" --list-versions)
check "--schema shows nested paths" grep -q '^6,5,st.x,int32' <("$J" lance "$D" --schema)
check "--schema of version 1 has no i2" test "$("$J" lance "$D" --schema --version 1 | grep -c ',i2,')" = 0
"$J" lance --help > "$JO_T/help"
for flag in --columns --version --format --align --prefix --merge-gap --blobs --tail-block --endpoint --list-versions --schema --help; do
	check "--help documents $flag" grep -q -- "$flag" "$JO_T/help"
done
check "--help has two examples" test "$(grep -c '^  jfsops lance ' "$JO_T/help")" -ge 2
# version 1 predates column i2: selecting it is an unknown column there.
expect_err "column added later, old version" 8 "column 'i2' does not exist" "$J" lance "$D" --version 1 --columns i2
# --blobs adds the blob payloads (the data region not referenced by any column).
a=$("$J" lance -q "$D" --columns blob --format jsonl | tail -1)
b=$("$J" lance -q "$D" --columns blob --blobs --format jsonl | tail -1)
check "--blobs adds payload bytes" "$PY" -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); assert b['bytes'] > a['bytes'] + 100000, (a, b)" "$a" "$b"

# --- bad input ---------------------------------------------------------
expect_err "unknown column" 8 "column 'nope' does not exist" "$J" lance "$D" --columns i,nope
expect_err "unknown nested column" 8 "column 'st.z' does not exist" "$J" lance "$D" --columns st.z
expect_err "missing version" 8 "version 42 does not exist" "$J" lance "$D" --columns i --version 42
expect_err "not a Lance directory" 8 "not a Lance dataset" "$J" lance "$JO_T" --columns i
mkdir -p "$JO_T/empty/_versions"
expect_err "empty _versions" 8 "no manifest" "$J" lance "$JO_T/empty" --columns i
expect_err "missing dataset" 8 "No such file" "$J" lance "$JO_T/nope.lance" --columns i
expect_err "usage: no columns" 2 "--columns is required" "$J" lance "$D"
expect_err "usage: bad version" 2 "bad --version" "$J" lance "$D" --columns i --version x
expect_err "usage: bad align" 2 "bad --align" "$J" lance "$D" --columns i --align 4Q
expect_err "usage: extra argument" 2 "too many arguments" "$J" lance "$D" extra --columns i

corrupt() { # corrupt NAME -> a fresh copy of the dataset in $C
	C="$JO_T/c_$1"; rm -rf "$C"; cp -r "$D" "$C"
}
corrupt trunc_manifest
truncate -s 100 "$C/_versions/4.manifest"
expect_err "truncated manifest" 7 "4.manifest" "$J" lance "$C" --columns i
corrupt magic_manifest
printf 'XXXX' | dd of="$C/_versions/4.manifest" bs=1 seek=$(( $(stat -c %s "$C/_versions/4.manifest") - 4 )) conv=notrunc status=none
expect_err "manifest without magic" 7 "no LANC magic" "$J" lance "$C" --columns i
corrupt garbage_manifest
head -c 3000 /dev/urandom > "$C/_versions/4.manifest"
expect_err "garbage manifest" 7 "manifest" "$J" lance "$C" --columns i
corrupt empty_manifest
: > "$C/_versions/4.manifest"
expect_err "empty manifest" 7 "truncated" "$J" lance "$C" --columns i
dfile=$("$J" lance -q "$D" --columns i | grep '^data/' | head -1 | cut -d, -f1)
corrupt trunc_data
truncate -s 1000 "$C/$dfile"
expect_err "truncated data file" 7 "$(basename "$dfile")" "$J" lance "$C" --columns i
corrupt footer_data
sz=$(stat -c %s "$C/$dfile")
head -c 40 /dev/urandom | dd of="$C/$dfile" bs=1 seek=$((sz - 40)) conv=notrunc status=none
expect_err "corrupt data footer" 7 "$(basename "$dfile")" "$J" lance "$C" --columns i
corrupt missing_data
rm "$C/$dfile"
expect_err "missing data file" 7 "$(basename "$dfile")" "$J" lance "$C" --columns i
corrupt missing_deletion
rm "$C"/_deletions/*
expect_err "missing deletion file" 7 "_deletions" "$J" lance "$C" --columns i
L="$JO_T/ds/ds_legacy"
lfile=$("$J" lance -q "$L" --columns i | grep '^data/' | head -1 | cut -d, -f1)
C="$JO_T/c_legacy"; rm -rf "$C"; cp -r "$L" "$C"
sz=$(stat -c %s "$C/$lfile")
head -c 16 /dev/zero | dd of="$C/$lfile" bs=1 seek=$((sz - 200)) conv=notrunc status=none
truncate -s $((sz / 2)) "$C/$lfile"
expect_err "truncated legacy data file" 7 "$(basename "$lfile")" "$J" lance "$C" --columns i,s

# Random corruption of every file of the dataset: any exit code but a crash.
for i in $(seq 1 40); do
	C="$JO_T/c_rand"; rm -rf "$C"; cp -r "$D" "$C"
	f=$(find "$C/_versions" "$C/data" -name '*.manifest' -o -name '*.lance' | shuf -n 1)
	sz=$(stat -c %s "$f")
	off=$(( (RANDOM * 32768 + RANDOM) % sz ))
	head -c $(( RANDOM % 64 + 1 )) /dev/urandom | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
	rc=0; "$J" lance "$C" --columns i,s,st,l,vec >/dev/null 2>"$JO_T/err" || rc=$?
	if [ "$rc" -ge 128 ] || grep -q -i 'sanitizer\|runtime error' "$JO_T/err" || [ "$(wc -l < "$JO_T/err")" -gt 1 ]; then
		echo "FAIL random corruption $i ($f at $off): exit $rc"; cat "$JO_T/err"; fails=$((fails + 1))
	fi
done
echo "ok   random corruption (40 runs, no crash)"

[ "$fails" = 0 ] || jo_die "lance_cli: $fails checks failed"
echo "lance_cli: ok"
