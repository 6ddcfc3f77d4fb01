# meta_lib.sh: shared scenario for meta_sqlite.sh / meta_redis.sh (sourced).
# Builds a volume with the real juicefs, then checks tests/tools/meta_dump
# (common/meta) against `juicefs dump`. Needs: $T (fresh temp dir), $META.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
J=${JUICEFS:-$ROOT/.venv/bin/juicefs}
BUILD=${BUILD:-$ROOT/build}
MNT_PID=
HOLD_PID=

[ -x "$J" ] || { echo "FAIL: juicefs binary not found at $J" >&2; exit 1; }
[ -f "$BUILD/libjo_common.a" ] || { echo "FAIL: $BUILD/libjo_common.a missing (build first, or set BUILD)" >&2; exit 1; }

meta_cleanup() {
	[ -n "$HOLD_PID" ] && kill "$HOLD_PID" 2>/dev/null || true
	if [ -n "$MNT_PID" ]; then
		for c in $(pgrep -P "$MNT_PID" || true); do kill "$c" 2>/dev/null || true; done
		kill "$MNT_PID" 2>/dev/null || true
	fi
	if mountpoint -q "$T/mnt" 2>/dev/null; then fusermount -uz "$T/mnt" 2>/dev/null || umount -l "$T/mnt" || true; fi
}

build_driver() {
	cc -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Werror -Wshadow \
		-Wformat=2 -Wno-missing-field-initializers -g -I"$ROOT" "$ROOT/tests/tools/meta_dump.c" \
		"$BUILD/libjo_common.a" $(pkg-config --libs jansson hiredis sqlite3 libssl libcrypto libpq libmariadb libcurl) \
		${META_DUMP_CFLAGS:-} -o "$T/meta_dump"
}

jfs() { "$J" --no-agent "$@"; }

mount_fg() { # mount in the foreground as a child we own, wait until ready
	mkdir -p "$T/mnt"
	"$J" mount --no-agent "$META" "$T/mnt" --metrics 127.0.0.1:$((${JO_PORT_BASE:-7000} + 30)) --no-usage-report \
		--backup-meta 0 --no-bgjob >"$T/mount.log" 2>&1 &
	MNT_PID=$!
	for _ in $(seq 100); do
		[ -e "$T/mnt/.config" ] && return 0
		sleep 0.1
	done
	echo "FAIL: mount did not come up" >&2; cat "$T/mount.log" >&2; exit 1
}

umount_fg() {
	"$J" umount "$T/mnt"
	wait "$MNT_PID" || true
	MNT_PID=
}

run_scenario() {
	local secret=SeCr3t/kEy+42
	build_driver
	jfs format "$META" vol --storage file --bucket "$T/objs/" --trash-days 0 \
		--access-key AK --secret-key "$secret" >"$T/format.log" 2>&1 ||
		{ cat "$T/format.log" >&2; exit 1; }
	mkdir -p "$T/src/d1" "$T/src/many"
	echo hello >"$T/src/a.txt"
	head -c 100000 /dev/urandom >"$T/src/d1/b.bin"
	echo x >"$T/src/d1/c.txt"
	head -c $((5 * 1024 * 1024 + 123)) /dev/urandom >"$T/src/big.bin"
	for i in $(seq 1 1000); do echo "file $i" >"$T/src/many/f$i"; done
	META="$META" jfs sync "$T/src/" jfs://META/ --threads 20 >"$T/sync1.log" 2>&1 ||
		{ cat "$T/sync1.log" >&2; exit 1; }

	# copies through a real mount: refcounts > 1 and a record with off > 0
	mount_fg
	python3 - "$T/mnt" <<'PY'
import os, sys
m = sys.argv[1]
s = os.open(m + "/d1/b.bin", os.O_RDONLY)
for name, off, n in (("b2.bin", 0, 100000), ("b3.bin", 25000, 50000)):
    d = os.open(m + "/d1/" + name, os.O_WRONLY | os.O_CREAT, 0o644)
    assert os.copy_file_range(s, d, n, off, 0) == n
    os.close(d)
os.close(s)
# sparse: only chunks 2 and 3 exist; an overwrite inside one slice (2 records)
d = os.open(m + "/sparse.bin", os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(d, b"z" * 10000, 2 * (64 << 20) + 5)
os.fsync(d)
os.pwrite(d, b"y" * 100, 2 * (64 << 20) + 50)
os.pwrite(d, b"w" * 10, 3 * (64 << 20))
os.close(d)
PY
	cp "$T/mnt/d1/b2.bin" "$T/mnt/d1/b3.bin" "$T/src/d1/"
	truncate -s "$(stat -c %s "$T/mnt/sparse.bin")" "$T/src/sparse.bin"
	touch -d 2001-01-01 "$T/src/d1/b2.bin" "$T/src/d1/b3.bin" "$T/src/sparse.bin"
	umount_fg

	# deletions: replace a.txt, remove c.txt and the 1000 small files
	echo "hello world, changed" >"$T/src/a.txt"
	rm -rf "$T/src/d1/c.txt" "$T/src/many"
	META="$META" jfs sync "$T/src/" jfs://META/ --update --delete-dst --threads 50 \
		>"$T/sync2.log" 2>&1 || { cat "$T/sync2.log" >&2; exit 1; }

	# an open-but-unlinked file of a session that dies: sustained + session;
	# the same mount unlinks the huge files: pending delfiles
	mount_fg
	python3 - "$T/mnt" "$T/held.ready" <<'PY' &
import os, sys, time
m, ready = sys.argv[1], sys.argv[2]
fd = os.open(m + "/held.txt", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"held open" * 100)
os.fsync(fd)
os.unlink(m + "/held.txt")
# huge sparse files (no chunks): deleting their data walks every chunk index
# (about 0.3 s each on Redis), so the kill below leaves some in delfiles
os.mkdir(m + "/huge")
for i in range(30):
    with open("%s/huge/h%d" % (m, i), "w") as f:
        f.truncate(64 << 40)
for i in range(30):
    os.unlink("%s/huge/h%d" % (m, i))
open(ready, "w").close()
time.sleep(120)
PY
	HOLD_PID=$!
	for _ in $(seq 100); do [ -e "$T/held.ready" ] && break; sleep 0.1; done
	[ -e "$T/held.ready" ] || { echo "FAIL: holder did not start" >&2; exit 1; }
	# juicefs mount (as root) runs the FUSE server in a child process: kill
	# that one first, so the session is not closed cleanly
	for c in $(pgrep -P "$MNT_PID" || true); do kill -9 "$c"; done
	kill -9 "$MNT_PID"; wait "$MNT_PID" 2>/dev/null || true; MNT_PID=
	kill "$HOLD_PID" 2>/dev/null || true; wait "$HOLD_PID" 2>/dev/null || true; HOLD_PID=
	fusermount -uz "$T/mnt" 2>/dev/null || umount -l "$T/mnt" || true

	# compaction with trash on: a delayed-slices entry (delSlices / jfs_delslices)
	jfs config "$META" --trash-days 1 >"$T/config.log" 2>&1 || { cat "$T/config.log" >&2; exit 1; }
	mount_fg
	python3 - "$T/mnt" <<'PY'
import os, sys
d = os.open(sys.argv[1] + "/frag.bin", os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(6):  # one slice per fsync'd write, all in chunk 0
    os.pwrite(d, bytes([65 + i]) * 4000, i * 3000)
    os.fsync(d)
os.close(d)
PY
	jfs compact "$T/mnt/frag.bin" >"$T/compact.log" 2>&1 || { cat "$T/compact.log" >&2; exit 1; }
	cp "$T/mnt/frag.bin" "$T/frag.copy"
	umount_fg
	python3 - "$T/frag.copy" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
want = bytearray(19000)
for i in range(6):
    want[i * 3000:i * 3000 + 4000] = bytes([65 + i]) * 4000
assert b == bytes(want), "frag.bin content"
PY

	jfs dump "$META" "$T/dump.json" >"$T/dump.log" 2>&1 || { cat "$T/dump.log" >&2; exit 1; }
	"$T/meta_dump" "$META" "$secret" >"$T/ours.json"
	python3 "$ROOT/tests/integration/meta_check.py" "$T/ours.json" "$T/dump.json" \
		--expect-secret --expect-sustained "--expect-refs=/d1/b.bin:3,/d1/b3.bin:3" --expect-delfiles \
		--expect-delslices=/frag.bin
}
