#!/usr/bin/env bash
# jfsops export on every engine of JO_ENGINES (default: redis sqlite3
# postgres mysql etcd), on a tree made through a real juicefs mount (nested
# directories, hard links, a symlink, a FIFO, an empty file, a name that is
# not UTF-8, a sparse file over two chunks, a file shrunk below a chunk
# boundary, an overwritten file with several slice records). Checks (export_check.py, with pyarrow and DuckDB):
#  - files.parquet and slices.parquet read back identically by pyarrow and
#    DuckDB, and equal `juicefs dump` (every path, inode, parent and
#    attribute; chunk figures and slice records from the dump's chunks)
#  - after writes, an append, chmod, renames (a directory with children), a
#    hard link removed, deletes into the trash and an rmdir, an incremental
#    export applied to the first equals a full export of the new state, which
#    equals juicefs dump again
#  - export refuses to overwrite an export, and an incremental from another
#    volume
#  - a live writer during an export: it succeeds, and (engines with snapshots)
#    every row's parent is its directory's inode
. "$(dirname "$0")/lib/init.sh" engines
JO_ENGINES=${JO_ENGINES:-redis sqlite3 postgres mysql etcd}
PY=$JO_VENV/bin/python
CHECK="$PY $here/export_check.py"
"$PY" -c 'import pyarrow, duckdb' 2>/dev/null || jo_die "pyarrow/duckdb missing in $JO_VENV: run bash tests/install.sh"

make_tree() {
	local m=$1 i
	mkdir -p "$m/proj/src/lib" "$m/proj/data" "$m/tmp" "$m/other"
	for i in 1 2 3 4 5; do head -c $((i * 3000)) /dev/urandom >"$m/proj/src/f$i.c"; done
	head -c 200000 /dev/urandom >"$m/proj/data/d.bin"
	# several records in one chunk: a write, then overwrites of parts of it
	head -c 300000 /dev/urandom >"$m/proj/data/frag"
	dd if=/dev/urandom of="$m/proj/data/frag" bs=1000 seek=10 count=20 conv=notrunc status=none
	dd if=/dev/urandom of="$m/proj/data/frag" bs=1000 seek=100 count=5 conv=notrunc status=none
	# sparse: a little data in chunk 0 and in chunk 1
	head -c 1000 /dev/urandom >"$m/proj/data/sparse"
	dd if=/dev/urandom of="$m/proj/data/sparse" bs=1024 seek=$((65 * 1024)) count=3 conv=notrunc status=none
	# shrunk below a chunk boundary: chunk 1 stays in the metadata past EOF
	dd if=/dev/urandom of="$m/proj/data/shrunk" bs=1024 seek=$((65 * 1024)) count=2 status=none
	truncate -s 5000 "$m/proj/data/shrunk"
	ln "$m/proj/data/d.bin" "$m/other/d-link"
	ln "$m/proj/src/f1.c" "$m/other/f1-link"
	ln -s ../data/d.bin "$m/proj/src/lib/sym"
	mkfifo "$m/proj/fifo"
	: >"$m/tmp/empty"
	touch "$m/tmp/$(printf 'bad\377name')"
	echo x >"$m/tmp/will-go"
	chmod 640 "$m/proj/src/f2.c"
}

change_tree() {
	local m=$1
	head -c 5000 /dev/urandom >>"$m/proj/src/f3.c"   # append: new slice record
	chmod 600 "$m/proj/src/f4.c"
	mv "$m/proj/src" "$m/proj/code"                    # every path below changes
	mv "$m/tmp/empty" "$m/other/empty2"
	rm "$m/other/f1-link"                              # a hard link goes, the inode stays
	rm "$m/tmp/will-go"                                # into the trash
	rm -r "$m/proj/data/sub" 2>/dev/null || true
	mkdir "$m/new" && head -c 7777 /dev/urandom >"$m/new/n1"
	touch -a -d '3 days ago' "$m/proj/data/d.bin"      # atime only
}

export_ok() { # META DIR [args]
	local meta=$1 dir=$2
	shift 2
	"$JO_BIN" export "$meta" --out "$dir" --json "$@" >"$dir.json" 2>"$dir.err" ||
		{ cat "$dir.err" >&2; jo_die "jfsops export --out $dir $* failed"; }
}

first_meta=
for e in $(engine_list); do
	mnt=$JO_T/mnt-$e
	engine_volume "$e" "ex-$e" "$mnt"
	make_tree "$mnt"
	sync

	e1=$JO_T/$e-e1
	export_ok "$meta" "$e1" --tables files,slices --row-group 64K
	jfs_dump "$meta" "$JO_T/$e-d1.json"
	$CHECK dump "$JO_T/$e-d1.json" "$e1" || jo_die "$e: the export differs from juicefs dump"
	grep -q '"point_in_time":'"$(case $e in redis*) echo false ;; *) echo true ;; esac)" "$e1.json" ||
		jo_die "$e: point_in_time in $(cat "$e1.json")"

	# no overwriting an export; no incremental across volumes
	if "$JO_BIN" export "$meta" --out "$e1" 2>"$JO_T/err"; then jo_die "$e: export overwrote $e1"; fi
	grep -q "holds an export already" "$JO_T/err" || jo_die "$e: $(cat "$JO_T/err")"
	if [ -n "$first_meta" ]; then
		if "$JO_BIN" export "$meta" --out "$JO_T/$e-x" --incremental "$first_e1" --tables files,slices \
			2>"$JO_T/err"; then jo_die "$e: incremental from another volume"; fi
		grep -q "another volume" "$JO_T/err" || jo_die "$e: $(cat "$JO_T/err")"
		[ ! -e "$JO_T/$e-x/_SUCCESS" ] || jo_die "$e: a refused export is marked complete"
	fi

	change_tree "$mnt"
	sync
	e2=$JO_T/$e-e2
	e3=$JO_T/$e-e3
	export_ok "$meta" "$e2" --tables files,slices --incremental "$e1"
	export_ok "$meta" "$e3" --tables files,slices
	$CHECK apply "$e1" "$e2" "$e3" || jo_die "$e: incremental + previous != full"
	jfs_dump "$meta" "$JO_T/$e-d3.json"
	$CHECK dump "$JO_T/$e-d3.json" "$e3" || jo_die "$e: the second full export differs from juicefs dump"
	# a second incremental with nothing changed: no row, nothing deleted
	e4=$JO_T/$e-e4
	export_ok "$meta" "$e4" --tables files,slices --incremental "$e3"
	$PY - "$e4.json" <<'EOF' || jo_die "$e: an unchanged volume gave rows"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["rows"] == 0 and s["deleted"] == 0 and s["inodes"] > 0, s
EOF

	# a live writer
	mkdir -p "$mnt/live"
	(
		i=0
		while [ ! -e "$JO_T/stop-$e" ]; do
			i=$((i + 1))
			mkdir -p "$mnt/live/d$i" && echo "$i" >"$mnt/live/d$i/f"
			[ $i -gt 3 ] && mv "$mnt/live/d$((i - 3))" "$mnt/live/d$i/moved"
			[ $i -gt 6 ] && rm -rf "$mnt/live/d$((i - 6))"
		done
	) &
	writer=$!
	sleep 1
	for k in 1 2; do
		export_ok "$meta" "$JO_T/$e-live$k" --tables files,slices
		# Redis keeps no snapshot: a directory moved mid-walk may be listed under two paths
		$CHECK read "$JO_T/$e-live$k" $([ "$e" = redis ] || echo --parents) || { touch "$JO_T/stop-$e"; wait $writer; jo_die "$e: live export"; }
	done
	touch "$JO_T/stop-$e"
	wait $writer
	jfs_umount "$mnt"
	[ -n "$first_meta" ] || { first_meta=$meta; first_e1=$e1; }
	echo "export_engines: $e ok" >&2
done
echo "export_engines: ok"
