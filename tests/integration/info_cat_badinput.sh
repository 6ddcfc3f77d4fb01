#!/usr/bin/env bash
# run_all: asan
# Bad input for jfsops info / cat: every case must give exactly one line on
# stderr, the documented exit code (common/exit.h: 2 usage/malformed URL,
# 5 unreachable, 6 auth, 7 not a JuiceFS volume/corrupt, 8 not found,
# 9 unsupported), no secret in the message, and nothing written anywhere
# (metadata databases and buckets are checksummed before and after).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/lib/infocat.sh"
jo_setup
JO_PY=$JO_VENV/bin/python
[ -x "$JO_BIN" ] || jo_die "jfsops binary $JO_BIN not found (set JFSOPS_BIN or build first)"

FAILS=0
PASSES=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }

RP=$JO_PORT_BASE            # redis without password
RPW=$((JO_PORT_BASE + 1))   # redis with a password
FREE=$((JO_PORT_BASE + 5))  # nothing listens here
jo_port_busy $FREE && jo_die "port $FREE should be free"
REDIS_PW=jo-right-pw-$RANDOM
start_redis $RP
start_redis $RPW --requirepass "$REDIS_PW"
start_seaweed $((JO_PORT_BASE + 10))
s3_mkbucket badin

# --- volumes
mkdir -p "$JO_T/src/d"
head -c 3000000 /dev/urandom >"$JO_T/src/d/big.bin"
echo hello >"$JO_T/src/d/small.txt"
head -c 600000 /dev/urandom >"$JO_T/src/d/other.bin"

SQ="sqlite3://$JO_T/v1.db"
jfs_format "$SQ" "$JO_T/b1" badsql --block-size 256K
jfs_sync_in "$JO_T/src" "$SQ"
RS="redis://127.0.0.1:$RP/1"
jfs_format "$RS" "$JO_S3_ENDPOINT/badin" badredis --block-size 256K
jfs_sync_in "$JO_T/src" "$RS"
RPWURL="redis://:$REDIS_PW@127.0.0.1:$RPW/2"
jfs_format "$RPWURL" "$JO_T/b3" badpw
jfs_sync_in "$JO_T/src" "$RPWURL"
# an encrypted volume
openssl genrsa -out "$JO_T/key.pem" 2048 2>/dev/null
ENC="sqlite3://$JO_T/enc.db"
jfs_format "$ENC" "$JO_T/benc" badenc --encrypt-rsa-key "$JO_T/key.pem"
jfs_sync_in "$JO_T/src" "$ENC"
# copies of the sqlite volume whose format record has one field juicefs
# cannot have written (validated, never defaulted: exit 7 naming the field)
mkdir -p "$JO_T/corrupt"
corrupt_format() { # NAME FIELD JSON-VALUE (or DELETE)
	"$JO_PY" - "$JO_T/v1.db" "$JO_T/corrupt/$1.db" "$2" "$3" <<'PY'
import json, sqlite3, sys
src = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
db = sqlite3.connect(sys.argv[2])
src.backup(db)  # the write-ahead log too: a plain copy of the file may lack it
src.close()
sys.argv = sys.argv[1:]
v = json.loads(db.execute("SELECT value FROM jfs_setting WHERE name='format'").fetchone()[0])
if sys.argv[3] == "DELETE":
    del v[sys.argv[2]]
else:
    v[sys.argv[2]] = json.loads(sys.argv[3])
db.execute("UPDATE jfs_setting SET value=? WHERE name='format'", (json.dumps(v),))
db.commit()
PY
}
corrupt_format bs0 BlockSize 0
corrupt_format bsneg BlockSize -1
corrupt_format bshuge BlockSize 4294971392
corrupt_format bsstr BlockSize '"256"'
corrupt_format bsgone BlockSize DELETE
corrupt_format gzip Compression '"gzip"'
corrupt_format store Storage '"nosuchstore"'
corrupt_format trash TrashDays -1
# sqlite databases that are not JuiceFS volumes
sqlite3 "$JO_T/other.db" "CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 'x');"
head -c 8192 /dev/urandom >"$JO_T/garbage.db"

# sanity: the good volumes work
"$JO_BIN" cat "$SQ" /d/small.txt | grep -qx hello || fail "cat on the sqlite volume does not work"
"$JO_BIN" cat "$RS" /d/small.txt | grep -qx hello || fail "cat on the redis+s3 volume does not work"

# --- snapshots for "nothing written"
files_digest() { (cd "$1" && find . -type f -printf '%p %s\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r cat) | sha256sum | cut -d' ' -f1; }
snapshot() {
	{
		for f in v1.db enc.db other.db garbage.db; do sha256sum "$JO_T/$f"; done
		ls "$JO_T" | grep '\.db' | sort
		files_digest "$JO_T/b1"
		files_digest "$JO_T/b3"
		files_digest "$JO_T/benc"
		"$JO_PY" "$JO_REPO/tests/tools/redisdigest.py" "$RS"
		"$JO_PY" "$JO_REPO/tests/tools/redisdigest.py" "redis://:$REDIS_PW@127.0.0.1:$RPW/2"
		"$JO_PY" "$JO_REPO/tests/tools/s3util.py" digest "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" badin
	} 2>&1
}

# expect CODE DESCRIPTION -- jfsops args...
expect() {
	local want=$1 what=$2
	shift 3
	local rc=0
	"$JO_BIN" "$@" >"$JO_T/run/out" 2>"$JO_T/run/err" </dev/null || rc=$?
	local lines
	lines=$(wc -l <"$JO_T/run/err")
	if [ "$rc" != "$want" ]; then
		fail "$what: exit $rc, want $want; stderr: $(head -c 400 "$JO_T/run/err")"
	elif [ "$lines" != 1 ]; then
		fail "$what: $lines lines on stderr, want 1: $(head -c 600 "$JO_T/run/err")"
	elif grep -qF -e "$REDIS_PW" -e "$JO_S3_SK" -e wrongpass -e wrongsecret "$JO_T/run/err"; then
		fail "$what: the message shows a secret: $(cat "$JO_T/run/err")"
	else
		PASSES=$((PASSES + 1))
		echo "ok ($rc) $what: $(cat "$JO_T/run/err")"
	fi
}

mkdir -p "$JO_T/run"
before=$(snapshot)

# 2: usage / malformed URL
expect 2 "no arguments" -- info
expect 2 "unknown flag" -- info "$SQ" --bogus
expect 2 "malformed URL (no scheme)" -- info not-a-url
expect 2 "malformed URL (bad port)" -- info "redis://127.0.0.1:99999999/1"
expect 2 "malformed URL (bad db)" -- info "redis://127.0.0.1:$RP/x"
expect 2 "malformed URL (empty sqlite path)" -- info "sqlite3://"
expect 2 "malformed URL for cat" -- cat "redis//127.0.0.1/1" /d/small.txt
expect 2 "cat without a path" -- cat "$SQ"
expect 2 "cat with a bad --offset" -- cat "$SQ" /d/small.txt --offset abc
# 5: unreachable
expect 5 "unreachable redis (info)" -- info "redis://127.0.0.1:$FREE/1"
expect 5 "unreachable redis (cat)" -- cat "redis://127.0.0.1:$FREE/1" /d/small.txt
expect 5 "unreachable S3 endpoint" -- cat "$RS" /d/big.bin --bucket "http://127.0.0.1:$FREE/badin"
# 6: credentials
expect 6 "wrong redis password" -- info "redis://:wrongpass@127.0.0.1:$RPW/2"
expect 6 "missing redis password" -- info "redis://127.0.0.1:$RPW/2"
expect 6 "wrong S3 secret" -- cat "$RS" /d/big.bin --secret-key wrongsecret
expect 6 "wrong S3 access key" -- cat "$RS" /d/big.bin --access-key nosuchkey --secret-key wrongsecret
# 7: not a JuiceFS volume
expect 7 "sqlite db that is not a volume (info)" -- info "sqlite3://$JO_T/other.db"
expect 7 "sqlite db that is not a volume (cat)" -- cat "sqlite3://$JO_T/other.db" /d/small.txt
expect 7 "a file that is not a sqlite db" -- info "sqlite3://$JO_T/garbage.db"
expect 7 "empty redis db" -- info "redis://127.0.0.1:$RP/9"
# 7: a corrupt format record, the field named
expect_field() { # CODE FIELD DESCRIPTION -- args
	local field=$2
	expect "$1" "$3" "$4" "${@:5}"
	grep -q "$field" "$JO_T/run/err" || fail "$3: the message does not name $field: $(cat "$JO_T/run/err")"
}
expect_field 7 BlockSize "format BlockSize 0 (info)" -- info "sqlite3://$JO_T/corrupt/bs0.db"
expect_field 7 BlockSize "format BlockSize 0 (cat)" -- cat "sqlite3://$JO_T/corrupt/bs0.db" /d/small.txt
expect_field 7 BlockSize "format BlockSize -1" -- info "sqlite3://$JO_T/corrupt/bsneg.db"
expect_field 7 BlockSize "format BlockSize 2^32+4096 (no int truncation)" -- info "sqlite3://$JO_T/corrupt/bshuge.db"
expect_field 7 BlockSize "format BlockSize a string" -- info "sqlite3://$JO_T/corrupt/bsstr.db"
expect_field 7 BlockSize "format without BlockSize" -- cat "sqlite3://$JO_T/corrupt/bsgone.db" /d/small.txt
expect_field 7 Compression "format Compression gzip" -- cat "sqlite3://$JO_T/corrupt/gzip.db" /d/small.txt
expect_field 7 Storage "format Storage unknown" -- info "sqlite3://$JO_T/corrupt/store.db"
expect_field 7 TrashDays "format TrashDays -1" -- info "sqlite3://$JO_T/corrupt/trash.db"
# 8: not found
expect 8 "sqlite db that does not exist" -- info "sqlite3://$JO_T/nosuch.db"
expect 8 "path not in the volume" -- cat "$SQ" /d/nosuch.txt
expect 8 "path not in the volume (redis)" -- cat "$RS" /nosuchdir/x
expect 8 "bucket that does not exist" -- cat "$RS" /d/small.txt --bucket "$JO_S3_ENDPOINT/nosuchbucket"
# 9: unsupported
expect 9 "encrypted volume" -- cat "$ENC" /d/small.txt
# info reads metadata only: it works on an encrypted volume and says so
if "$JO_BIN" info "$ENC" --json 2>"$JO_T/run/err" | "$JO_PY" -c 'import json,sys; sys.exit(0 if json.load(sys.stdin).get("encrypted") is True else 1)'; then
	PASSES=$((PASSES + 1))
else
	fail "jfsops info on the encrypted volume failed or does not say encrypted: $(head -c 300 "$JO_T/run/err")"
fi
[ -e "$JO_T/nosuch.db" ] && fail "jfsops created $JO_T/nosuch.db"

after=$(snapshot)
if [ "$before" != "$after" ]; then
	fail "something was written: $(diff <(echo "$before") <(echo "$after") | head -20)"
else
	PASSES=$((PASSES + 1))
fi

# 8: a missing object: delete the full-size (256 KiB, uncompressed) blocks,
# which only big.bin (3 MB) and other.bin (600 kB) have; then nothing else may change
n=0
while IFS= read -r blk; do rm -f "$JO_T/b1/$blk"; n=$((n + 1)); done < <(cd "$JO_T/b1" && find . -path '*/chunks/*' -type f -size 262144c)
[ $n -ge 11 ] || jo_die "expected 11+ full blocks in $JO_T/b1, found $n"
n=0
while read -r key size _; do
	[ "$size" = 262144 ] || continue
	"$JO_PY" "$JO_REPO/tests/tools/s3util.py" delete "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" badin "$key"
	n=$((n + 1))
done < <("$JO_PY" "$JO_REPO/tests/tools/s3util.py" list "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" badin)
[ $n -ge 11 ] || jo_die "expected 11+ full blocks in bucket badin, found $n"
before=$(snapshot)
expect 8 "missing block object (file storage)" -- cat "$SQ" /d/big.bin
expect 8 "missing block object (s3)" -- cat "$RS" /d/big.bin
expect 8 "missing block object, a range" -- cat "$RS" /d/other.bin --offset 1000 --length 10
after=$(snapshot)
[ "$before" = "$after" ] && PASSES=$((PASSES + 1)) || fail "something was written after a missing object"

echo "$(basename "$0"): $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
