#!/usr/bin/env bash
# jfsops doctor on every engine of JO_ENGINES (default: PostgreSQL,
# MariaDB and etcd): a healthy volume is all "ok" and names the server and its
# version; each broken setup gives a FAIL metadata line with a hint in that
# engine's words and its own exit code: wrong SQL or etcd password 11 (and
# no secret printed), the password from META_PASSWORD / META_PASSWORD_FILE 0,
# unreachable server 5, missing database 8, a database without JuiceFS
# tables (or another table_prefix) 7, a malformed URL 2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/../lib/engines.sh"
jo_setup
JO_ENGINES=${JO_ENGINES:-postgres mysql etcd}
DEAD=$((JO_PORT_BASE + 5))
jo_port_busy "$DEAD" && jo_die "port $DEAD should be closed for the unreachable case"
fails=0

# case NAME WANT_EXIT REGEX CMD...: exit WANT_EXIT; on failure a "FAIL metadata"
# line matching REGEX followed by a hint; never a password in the output
case_() {
	local name=$1 want=$2 re=$3 rc=0 ok=1
	shift 3
	"$@" >"$JO_T/$name.out" 2>"$JO_T/$name.err" || rc=$?
	[ "$rc" = "$want" ] || { echo "FAIL $name: exit $rc, want $want"; ok=0; }
	if [ "$want" = 0 ]; then
		grep -qE '^FAIL |"result":"FAIL"' "$JO_T/$name.out" && { echo "FAIL $name: a check failed"; ok=0; }
		grep -qE "^ok +metadata .*($re)|\"check\":\"metadata\",\"result\":\"ok\",\"detail\":\".*($re)" \
			"$JO_T/$name.out" || { echo "FAIL $name: no ok metadata line matching /$re/"; ok=0; }
	else
		grep -qE "^FAIL +metadata .*($re)" "$JO_T/$name.out" || { echo "FAIL $name: no FAIL metadata line matching /$re/"; ok=0; }
		grep -A1 -E '^FAIL +metadata ' "$JO_T/$name.out" | grep -q '^      hint: ' || { echo "FAIL $name: no hint"; ok=0; }
	fi
	if grep -qE "$JO_PG_PASS|$JO_MY_PASS|etcdroot|wrongpass" "$JO_T/$name.out" "$JO_T/$name.err"; then
		echo "FAIL $name: a password appears in the output"; ok=0
	fi
	if [ $ok = 0 ]; then
		fails=$((fails + 1))
		sed 's/^/    | /' "$JO_T/$name.out" "$JO_T/$name.err"
	else
		echo "ok   $name (exit $rc)"
	fi
}

for e in $(engine_list); do
	engine_start "$e"
	engine_meta "$e" "doc_$e"
	good=$JO_META
	jfs_format "$good" "$JO_T/bucket-doc-$e" "doc-$e"
	engine_meta "$e" "empty_$e"
	empty=$JO_META
	case $e in
	postgres)
		server='server PostgreSQL [0-9]+\.[0-9]+'
		wrong=${good/:$JO_PG_PASS@/:wrongpass@}
		nopw=${good/:$JO_PG_PASS@/@}
		pw=$JO_PG_PASS
		dead="postgres://postgres@127.0.0.1:$DEAD/doc_$e?sslmode=disable&connect_timeout=3"
		nodb=${good/\/doc_$e?/\/no_such_db?}
		;;
	mysql)
		server='server MariaDB [0-9]+\.[0-9]+'
		wrong=${good/:$JO_MY_PASS@/:wrongpass@}
		nopw=${good/:$JO_MY_PASS@/:@}
		pw=$JO_MY_PASS
		dead="mysql://jfs@(127.0.0.1:$DEAD)/doc_$e?timeout=3s"
		nodb=${good/\/doc_$e/\/no_such_db}
		;;
	etcd)
		server='server etcd [0-9]+\.[0-9]+'
		wrong=; nopw=; pw=; nodb=
		dead="etcd://127.0.0.1:$DEAD/doc_$e"
		;;
	*) server=.; wrong=; nopw=; pw=; dead=; nodb= ;;
	esac
	case_ "$e-healthy" 0 "$server" "$JO_BIN" doctor "$good"
	case_ "$e-healthy-json" 0 "$server" "$JO_BIN" doctor "$good" --json
	# file storage keeps directories: doctor's probe leaves none behind
	left=$(find "$JO_T/bucket-doc-$e/doc-$e" -mindepth 1 -maxdepth 1 ! -name juicefs_uuid ! -name chunks)
	if [ -n "$left" ]; then
		echo "FAIL $e-leftovers: doctor left $left"
		fails=$((fails + 1))
	else
		echo "ok   $e-leftovers: nothing of doctor's in the bucket"
	fi
	[ -z "$wrong" ] || case_ "$e-wrong-password" 11 'password|authentication|Access denied' "$JO_BIN" doctor "$wrong"
	grep -q 'META_PASSWORD' "$JO_T/$e-wrong-password.out" 2>/dev/null ||
		[ -z "$wrong" ] || { echo "FAIL $e-wrong-password: the hint does not name META_PASSWORD"; fails=$((fails + 1)); }
	if [ -n "$nopw" ]; then
		case_ "$e-meta-password" 0 "$server" env META_PASSWORD="$pw" "$JO_BIN" doctor "$nopw"
		printf '%s\n' "$pw" >"$JO_T/pwfile"
		case_ "$e-meta-password-file" 0 "$server" env META_PASSWORD_FILE="$JO_T/pwfile" "$JO_BIN" doctor "$nopw"
		# a password in the URL wins over the environment
		case_ "$e-url-password-wins" 11 'password|authentication|Access denied' \
			env META_PASSWORD="$pw" "$JO_BIN" doctor "$wrong"
	fi
	[ -z "$dead" ] || case_ "$e-unreachable" 5 'connect|refused|Connection' "$JO_BIN" doctor "$dead"
	[ -z "$nodb" ] || case_ "$e-no-database" 8 'does not exist|Unknown database' "$JO_BIN" doctor "$nodb"
	case_ "$e-not-a-volume" 7 'not a JuiceFS volume' "$JO_BIN" doctor "$empty"
	[ "$e" != etcd ] || continue
	case $good in
	*\?*) other="$good&table_prefix=other" ;;
	*) other="$good?table_prefix=other" ;;
	esac
	case_ "$e-other-prefix" 7 'jfs_other_setting' "$JO_BIN" doctor "$other"
done

# etcd with authentication on: a wrong password is exit 11 and never printed
case " $(engine_list) " in
*" etcd "*)
	start_etcd $((JO_PORT_BASE + 28)) --auth etcdroot
	good="etcd://root:etcdroot@127.0.0.1:$((JO_PORT_BASE + 28))/docauth"
	jfs_format "$good" "$JO_T/bucket-doc-etcdauth" doc-etcdauth
	case_ etcd-auth-healthy 0 'server etcd' "$JO_BIN" doctor "$good"
	case_ etcd-wrong-password 11 'auth|password|authentication' \
		"$JO_BIN" doctor "etcd://root:wrongpass@127.0.0.1:$((JO_PORT_BASE + 28))/docauth"
	;;
esac
case_ malformed-pg 2 'postgres META-URL' "$JO_BIN" doctor "postgres://127.0.0.1:5432/jfs"
case_ malformed-my 2 'mysql META-URL' "$JO_BIN" doctor "mysql://jfs@127.0.0.1:3306/jfs"

if [ "$fails" -gt 0 ]; then
	echo "engines_doctor: $fails failure(s)"
	exit 1
fi
echo "engines_doctor: all cases ok"
