#!/usr/bin/env bash
# The SQL META-URL forms juicefs takes, each used by the real juicefs to
# format and fill a volume and then read byte-exactly by jfsops:
#   PostgreSQL: TCP, the Unix socket (?host=/dir), search_path=SCHEMA,
#     table_prefix (two volumes in one database), sslmode=require and
#     verify-full with sslrootcert (and a wrong CA: refused, exit 5);
#   MariaDB: (host:port), tcp(...), unix(/path), table_prefix, tls=skip-verify
#     (and tls=true against a self-signed server: refused, exit 5);
#   META_PASSWORD for a URL without one; a password is blanked in the
#   process's own argv (what ps shows) while jfsops runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/../lib/engines.sh"
jo_setup
fails=0
mkdir -p "$JO_T/src/d"
for i in 1 2 3; do head -c $((i * 1500000 + 17)) /dev/urandom >"$JO_T/src/d/f$i"; done
want=$(sha256sum <"$JO_T/src/d/f3" | cut -d' ' -f1)

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# volume NAME META: format with juicefs, fill with juicefs sync
volume() {
	jfs_format "$2" "$JO_T/bucket-$1" "$1"
	jfs_sync_in "$JO_T/src" "$2"
}

# reads NAME META [env...]: jfsops info names the volume, cat is byte-exact
reads() {
	local name=$1 meta=$2 got
	shift 2
	if ! env "$@" "$JO_BIN" info "$meta" --json >"$JO_T/info.json" 2>"$JO_T/info.err"; then
		fail "$name: jfsops info failed: $(cat "$JO_T/info.err")"
		return
	fi
	grep -q "\"name\":\"$name\"" "$JO_T/info.json" || fail "$name: info shows another volume: $(cat "$JO_T/info.json")"
	got=$(env "$@" "$JO_BIN" cat "$meta" /d/f3 | sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ] || fail "$name: cat is not byte-exact"
	echo "ok   $name: $meta"
}

# refused NAME WANT_EXIT REGEX META
refused() {
	local rc=0
	"$JO_BIN" info "$4" >/dev/null 2>"$JO_T/ref.err" || rc=$?
	[ "$rc" = "$2" ] || fail "$1: exit $rc, want $2 ($(cat "$JO_T/ref.err"))"
	grep -qE "$3" "$JO_T/ref.err" || fail "$1: error does not match /$3/: $(cat "$JO_T/ref.err")"
	[ "$rc" != "$2" ] || echo "ok   $1 refused (exit $rc): $(head -c 160 "$JO_T/ref.err")"
}

# argv_blank META: while `jfsops cat` runs, its argv shows no password
argv_blank() {
	local meta=$1 pw=$2 pid
	"$JO_BIN" cat "$meta" /d/f3 > >(sleep 3; cat >/dev/null) &
	pid=$!
	sleep 1
	if [ -r "/proc/$pid/cmdline" ]; then
		if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$pw"; then
			fail "the password shows in jfsops's argv: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
		else
			echo "ok   argv blanked: $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-120)"
		fi
	else
		fail "jfsops cat ended before its argv could be read"
	fi
	wait "$pid" || true
}

# ---- PostgreSQL
engine_start postgres
P=postgres:$JO_PG_PASS@127.0.0.1:$JO_PG_PORT
pg_sql postgres "CREATE DATABASE urls" >/dev/null
volume pg-tcp "postgres://$P/urls?sslmode=disable"
reads pg-tcp "postgres://$P/urls?sslmode=disable"
reads pg-tcp "postgres://postgres@/urls?host=$JO_PG_SOCK&port=$JO_PG_PORT"
volume pg-prefix "postgres://$P/urls?sslmode=disable&table_prefix=v2"
reads pg-prefix "postgres://$P/urls?sslmode=disable&table_prefix=v2"
reads pg-tcp "postgres://$P/urls?sslmode=disable"
pg_sql urls "CREATE SCHEMA vols" >/dev/null
volume pg-schema "postgres://$P/urls?sslmode=disable&search_path=vols"
reads pg-schema "postgres://$P/urls?sslmode=disable&search_path=vols"
reads pg-tcp "postgres://$P/urls?sslmode=require"
reads pg-tcp "postgres://$P/urls?sslmode=verify-full&sslrootcert=$JO_PG_CERTS/ca.pem"
refused pg-wrong-ca 5 'certificate|SSL' "postgres://$P/urls?sslmode=verify-full&sslrootcert=$JO_PG_CERTS/other-ca.pem"
reads pg-tcp "postgres://postgres@127.0.0.1:$JO_PG_PORT/urls?sslmode=disable" META_PASSWORD="$JO_PG_PASS"
argv_blank "postgres://$P/urls?sslmode=disable" "$JO_PG_PASS"

# ---- MariaDB
engine_start mysql
M=jfs:$JO_MY_PASS
my_sql "" "CREATE DATABASE urls"
volume my-tcp "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls"
reads my-tcp "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls"
reads my-tcp "mysql://$M@tcp(127.0.0.1:$JO_MY_PORT)/urls"
reads my-tcp "mysql://$M@unix($JO_MY_SOCK)/urls"
volume my-prefix "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls?table_prefix=v2"
reads my-prefix "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls?table_prefix=v2"
reads my-tcp "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls?tls=skip-verify"
refused my-tls-self-signed 5 'certificate|SSL|TLS|verif' "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls?tls=true"
refused my-tls-name 2 'tls=custom' "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls?tls=custom"
reads my-tcp "mysql://jfs:@(127.0.0.1:$JO_MY_PORT)/urls" META_PASSWORD="$JO_MY_PASS"
argv_blank "mysql://$M@(127.0.0.1:$JO_MY_PORT)/urls" "$JO_MY_PASS"

if [ "$fails" -gt 0 ]; then
	echo "engines_urls: $fails failure(s)"
	exit 1
fi
echo "engines_urls: ok"
