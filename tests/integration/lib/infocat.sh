# shellcheck shell=bash
# tests/integration/lib/infocat.sh: shared steps of the info_cat_<variant>.sh
# integration tests. Source after tests/lib/services.sh and jo_setup.
#
#   ic_run_variant META BLOCKSIZE TRASHDAYS
# fills the (already formatted) volume through a FUSE mount and through
# `juicefs sync`, makes pending removed files and delayed slices, then checks
#   - `jfsops cat` (whole files and --offset/--length ranges) against the
#     bytes read through a fresh read-only juicefs mount (sha256);
#   - `jfsops info --json` counts against `juicefs dump` (tests/tools/dumpcount.py).
#
# Environment:
#   JO_FILES     number of random files (default 40: 2/3 via the mount, 1/3 via sync)
#   JO_MAXSIZE   maximum random file size in bytes (default 3 MiB; up to 200 MiB)
#   JO_HEAVY=1   also files of exact multiples of the 64 MiB chunk size
#   JO_SEED      random seed (default: derived from the date; printed)
#   JO_DRYRUN=1  only run the juicefs side (no jfsops binary needed); prints
#                DRYRUN and exits 3 at the end so it never counts as a pass.

JO_PY=${JO_PY:-}
IC_FAIL=0
IC_CHECKS=0

ic_fail() {
	echo "FAIL: $*" >&2
	IC_FAIL=$((IC_FAIL + 1))
}

ic_ok() {
	IC_CHECKS=$((IC_CHECKS + 1))
}

# ic_range_sha FILE OFF LEN: sha256 of bytes [OFF, OFF+LEN) of FILE (to EOF).
ic_range_sha() {
	"$JO_PY" -c '
import hashlib, sys
f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2])); n = int(sys.argv[3]); h = hashlib.sha256()
while n > 0:
    b = f.read(min(n, 1 << 22))
    if not b:
        break
    h.update(b); n -= len(b)
print(h.hexdigest())' "$1" "$2" "$3"
}

# ic_fill META MP BS TRASHDAYS: write every kind of file; prints nothing.
ic_fill() {
	local meta=$1 mp=$2 bs=$3 trash=$4
	local seed=${JO_SEED:-$(date +%s)}
	local nfiles=${JO_FILES:-40} maxsize=${JO_MAXSIZE:-$((3 << 20))}
	local heavy=
	[ "${JO_HEAVY:-0}" = 1 ] && heavy=heavy
	jo_log "fill: seed $seed, $nfiles files up to $maxsize bytes ${heavy:+(heavy)}"
	local nsync=$((nfiles / 3)) nmount=$((nfiles - nfiles / 3))
	# 1. through the FUSE mount
	jfs_mount "$meta" "$mp"
	mkdir -p "$mp/m"
	"$JO_PY" "$JO_REPO/tests/tools/gen_files.py" plain "$mp/m" "$seed" "$nmount" "$maxsize" "$bs" $heavy >/dev/null
	"$JO_PY" "$JO_REPO/tests/tools/gen_files.py" rewrite "$mp/m" "$((seed + 1))" "$bs" $heavy >/dev/null
	# a hard link and a symlink (counted once / not a file)
	ln "$mp/m/rw/over0.bin" "$mp/m/rw/over0.hardlink"
	ln -s rw/over1.bin "$mp/m/symlink"
	mkdir -p "$mp/m/emptydir" "$mp/m/compactme"
	# a directory for `juicefs compact`: overlapping slices, then compacted
	"$JO_PY" "$JO_REPO/tests/tools/gen_files.py" rewrite "$mp/m/compactme" "$((seed + 2))" "$bs" >/dev/null
	"$JUICEFS" compact --no-agent "$mp/m/compactme" >"$JO_T/compact.log" 2>&1 ||
		{ jo_tail "$JO_T/compact.log"; jo_die "juicefs compact failed"; }
	# files to be removed (trash days > 0: they go to the trash first)
	mkdir -p "$mp/m/gone"
	head -c $((bs + 100)) /dev/urandom >"$mp/m/gone/a.bin"
	head -c 1000 /dev/urandom >"$mp/m/gone/b.bin"
	head -c $((2 * bs)) /dev/urandom >"$mp/m/gone/c.bin"
	sync
	rm -f "$mp/m/gone/a.bin"
	jfs_umount "$mp"
	# 2. through juicefs sync
	local src=$JO_T/syncsrc
	mkdir -p "$src"
	"$JO_PY" "$JO_REPO/tests/tools/gen_files.py" plain "$src" "$((seed + 3))" "$nsync" "$maxsize" "$bs" >/dev/null
	jfs_sync_in "$src" "$meta" s
	# 3. pending removed files: remove files whose data takes a while to
	# clean, then crash the mount before its background deletion finishes.
	jfs_mount "$meta" "$mp" --max-deletes 0
	"$JO_PY" "$JO_REPO/tests/tools/gen_files.py" pending "$mp/pend" "$((seed + 4))" "${JO_PEND_CHUNKS:-1500}" >/dev/null
	sync
	local pids
	pids=$(jfs_mount_pids "$mp")
	[ -n "$pids" ] || jo_die "no juicefs process found for $mp"
	if [ "$trash" != 0 ]; then
		rm -f "$mp/pend/many.bin" "$mp/pend/huge.bin" "$mp/m/gone/b.bin" "$mp/m/gone/c.bin"
		# removing from the trash deletes for good
		find "$mp/.trash/" -type f \( -name '*-many.bin' -o -name '*-huge.bin' \) -delete
	else
		rm -f "$mp/pend/many.bin" "$mp/pend/huge.bin" "$mp/m/gone/b.bin" "$mp/m/gone/c.bin"
	fi
	# shellcheck disable=SC2086
	jfs_crash "$mp" $pids
}

# ic_check_cat META MP: jfsops cat == read through a read-only mount.
ic_check_cat() {
	local meta=$1 mp=$2 bs=$3
	jfs_mount "$meta" "$mp" --read-only --no-bgjob
	local list=$JO_T/files.txt
	(cd "$mp" && find m s -type f | sort) >"$list"
	local n
	n=$(wc -l <"$list")
	[ "$n" -ge 10 ] || jo_die "only $n files found in the volume"
	jo_log "cat: checking $n files"
	local rel want got size rc err=$JO_T/cat.err
	while IFS= read -r rel; do
		want=$(sha256sum <"$mp/$rel" | cut -d' ' -f1)
		[ -n "${JO_DRYRUN:-}" ] && continue
		rc=0
		"$JO_BIN" cat "$meta" "/$rel" 2>"$err" >"$JO_T/cat.out" || rc=$?
		if [ $rc != 0 ]; then
			ic_fail "jfsops cat /$rel exited $rc: $(head -c 300 "$err")"
			continue
		fi
		got=$(sha256sum <"$JO_T/cat.out" | cut -d' ' -f1)
		if [ "$got" != "$want" ]; then
			ic_fail "jfsops cat /$rel: sha256 $got, mount gives $want (size $(stat -c %s "$mp/$rel") vs $(stat -c %s "$JO_T/cat.out"))"
		else
			ic_ok
		fi
	done <"$list"
	# ranges crossing block (and chunk) boundaries, on the larger files
	local chunk=$((64 << 20)) off len k
	while IFS= read -r rel; do
		size=$(stat -c %s "$mp/$rel")
		[ "$size" -gt $((bs + 100)) ] || continue
		for k in "$((bs - 10)):20" "$((bs - 1)):2" "1:$((bs + 1))" "$((bs / 2)):$((bs * 2))" \
			"$((size - 3)):100" "$((size / 3)):$((size / 3 + 7))" "0:1" "$size:10" \
			"$((chunk - 5)):10" "$((chunk - bs / 2)):$((bs * 2))"; do
			off=${k%%:*}
			len=${k##*:}
			[ "$off" -ge 0 ] && [ "$off" -le "$size" ] || continue
			want=$(ic_range_sha "$mp/$rel" "$off" "$len")
			[ -n "${JO_DRYRUN:-}" ] && continue
			rc=0
			"$JO_BIN" cat "$meta" "/$rel" --offset "$off" --length "$len" 2>"$err" >"$JO_T/cat.out" || rc=$?
			if [ $rc != 0 ]; then
				ic_fail "jfsops cat /$rel --offset $off --length $len exited $rc: $(head -c 300 "$err")"
				continue
			fi
			got=$(sha256sum <"$JO_T/cat.out" | cut -d' ' -f1)
			if [ "$got" != "$want" ]; then
				ic_fail "jfsops cat /$rel --offset $off --length $len: sha256 differs (got $(stat -c %s "$JO_T/cat.out") bytes)"
			else
				ic_ok
			fi
		done
	done < <(head -n 400 "$list" | awk 'NR % 3 == 1')
	# a reader that stops early (`| head`) is a quiet stop with 141 (as cat's
	# SIGPIPE), a full disk one error line naming the cause and exit 3
	rel=$(cd "$mp" && find m s -type f -size +1M | sort | head -n 1)
	if [ -n "$rel" ] && [ -z "${JO_DRYRUN:-}" ]; then
		want=$(head -c 10 "$mp/$rel" | od -An -tx1)
		got=$("$JO_BIN" cat "$meta" "/$rel" 2>"$err" | head -c 10 | od -An -tx1; echo "rc=${PIPESTATUS[0]}")
		if [ "$got" != "$want"$'\n'"rc=141" ] || [ -s "$err" ]; then
			ic_fail "jfsops cat /$rel | head -c 10: want the first 10 bytes, exit 141 and no message, got '$got' and '$(head -c 300 "$err")'"
		else
			ic_ok
		fi
		rc=0
		"$JO_BIN" cat "$meta" "/$rel" 2>"$err" >/dev/full || rc=$?
		if [ $rc != 3 ] || [ "$(wc -l <"$err")" != 1 ] || ! grep -q 'No space left on device' "$err"; then
			ic_fail "jfsops cat /$rel >/dev/full: want exit 3 and one line naming ENOSPC, got $rc: $(head -c 300 "$err")"
		else
			ic_ok
		fi
	fi
	jfs_umount "$mp"
}

# ic_check_info META: jfsops info --json counts == juicefs dump counts.
ic_check_info() {
	local meta=$1
	jfs_dump "$meta" "$JO_T/dump.json"
	"$JO_PY" "$JO_REPO/tests/tools/dumpcount.py" "$JO_T/dump.json" "$meta" >"$JO_T/want.json"
	jo_log "dump says: $(cat "$JO_T/want.json")"
	# the fill must have produced every kind of record we compare
	"$JO_PY" - "$JO_T/want.json" "${IC_TRASH:-0}" <<'EOF' || jo_die "the test volume lacks a record kind (see above)"
import json, sys
w = json.load(open(sys.argv[1])); trash = int(sys.argv[2])
need = ["files", "chunks", "slices", "pending_files"] + (["delayed_slices"] if trash else [])
bad = [k for k in need if not w.get(k)]
if max(int(k) for k in w["hist"]) < 3:
    bad.append("hist (no chunk with 3+ slices)")
if bad:
    print("missing in test volume: %s" % bad, file=sys.stderr); sys.exit(1)
EOF
	[ -n "${JO_DRYRUN:-}" ] && return 0
	if ! "$JO_BIN" info "$meta" --json >"$JO_T/info.json" 2>"$JO_T/info.err"; then
		ic_fail "jfsops info --json failed: $(head -c 300 "$JO_T/info.err")"
		return 0
	fi
	jo_log "jfsops info says: $(head -c 2000 "$JO_T/info.json")"
	local out
	if out=$("$JO_PY" "$JO_REPO/tests/tools/cmpinfo.py" "$JO_T/want.json" "$JO_T/info.json" 2>&1); then
		ic_ok
	else
		ic_fail "jfsops info differs from juicefs dump: $out"
	fi
	# plain text output works too and names the volume
	if ! "$JO_BIN" info "$meta" >"$JO_T/info.txt" 2>"$JO_T/info.err"; then
		ic_fail "jfsops info (text) failed: $(head -c 300 "$JO_T/info.err")"
	elif ! grep -q "$("$JO_PY" -c 'import json,sys;print(json.load(open(sys.argv[1]))["uuid"])' "$JO_T/want.json")" "$JO_T/info.txt"; then
		ic_fail "jfsops info (text) does not show the volume UUID"
	else
		ic_ok
	fi
}

# ic_snapshot META BUCKETSPEC: a digest of the metadata database (sqlite file
# or redis keys or every SQL table) for "nothing was written" checks.
ic_meta_digest() {
	local meta=$1
	case $meta in
	sqlite3://*)
		local p=${meta#sqlite3://}
		p=${p%%\?*}
		sha256sum "$p" | cut -d" " -f1
		;;
	redis://*)
		"$JO_PY" "$JO_REPO/tests/tools/redisdigest.py" "$meta"
		;;
	postgres://* | mysql://*)
		"$JO_PY" "$JO_REPO/tests/tools/sqlmeta.py" digest "$meta"
		;;
	etcd://*)
		"$JO_PY" "$JO_REPO/tests/tools/kvmeta.py" digest "$meta"
		;;
	esac
}

# ic_run_variant META MP BS TRASHDAYS
ic_run_variant() {
	local meta=$1 mp=$2 bs=$3 trash=$4
	JO_PY=${JO_PY:-$JO_VENV/bin/python}
	IC_TRASH=$trash
	if [ -z "${JO_DRYRUN:-}" ] && [ ! -x "$JO_BIN" ]; then
		jo_die "jfsops binary $JO_BIN not found (set JFSOPS_BIN or build first)"
	fi
	ic_fill "$meta" "$mp" "$bs" "$trash"
	ic_check_info "$meta"
	ic_check_cat "$meta" "$mp" "$bs"
	# reading must not have changed the volume
	if [ -z "${JO_DRYRUN:-}" ]; then
		local before after
		before=$(ic_meta_digest "$meta")
		"$JO_BIN" info "$meta" --json >/dev/null 2>&1 || true
		"$JO_BIN" cat "$meta" "/m/rw/over0.bin" >/dev/null 2>&1 || true
		after=$(ic_meta_digest "$meta")
		[ "$before" = "$after" ] && ic_ok || ic_fail "jfsops info/cat changed the metadata"
	fi
	if [ -n "${JO_DRYRUN:-}" ]; then
		echo "DRYRUN: juicefs side ok ($IC_FAIL failures)"
		exit 3
	fi
	if [ "$IC_FAIL" -ne 0 ]; then
		echo "$(basename "$0"): $IC_FAIL failed checks, $IC_CHECKS passed" >&2
		exit 1
	fi
	echo "$(basename "$0"): all $IC_CHECKS checks passed"
}
