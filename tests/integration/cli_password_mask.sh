#!/bin/bash
# cli_password_mask.sh: what ps shows of a jfsops command line holds every
# secret as a fixed "****" and nothing of its length (issue 26, item 9):
# /proc/PID/cmdline, readable by every user, was the password's own bytes
# turned to as many stars.
#
# 1. A Redis that requires a 40-character password; `jfsops warmup` with it
#    in the META-URL and a --secret-key of 33 characters (and one of 2 in the
#    --opt=VALUE form), held while it waits for its range FIFO (after it has
#    read the volume's format with the password): /proc/PID/cmdline is
#    exactly the masked line, one NUL at its end (no NUL-separated tail
#    that counts the hidden bytes), read as user nobody too; ps shows it;
#    the command then ends well (the password reached Redis).
# 2. The same command with a second password of the same user, 7 characters:
#    byte for byte the same cmdline.
# 3. sync: --src-secret-key, --dst-secret-key=, and a --cluster URL with a
#    password, held at --filter-from FIFO: each is "****".
# 4. A command line without secrets is left as it was (NUL-separated).
#
# Env: JFSOPS_BIN, JO_PORT_BASE (Redis BASE+60).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/services.sh
. "$HERE/../lib/services.sh"
jo_setup
PY=$JO_VENV/bin/python
PW=Zq7vK2pL9xW4mN8rT1yB6cH3jD5fG0sAeUoIiQwX # 40 characters
PW2=s3cr3t7
SK=AbCdEfGhIjKlMnOpQrStUvWxYz0123456 # 33 characters
start_redis $((JO_PORT_BASE + 60)) --requirepass "$PW"
redis-cli -h 127.0.0.1 -p "$JO_REDIS_PORT" -a "$PW" --no-auth-warning ACL SETUSER default ">$PW2" >/dev/null
HP=127.0.0.1:$JO_REDIS_PORT
jfs_format "redis://:$PW@$HP/1" "$JO_T/objs" pmvol --trash-days 0
chmod 711 "$JO_T"

# held FIFO CMD...: run CMD in the background until it waits to open FIFO
# (the kernel's wait_for_partner: nobody writes it yet); its pid in HELD
held() {
	local fifo=$1 i
	shift
	rm -f "$fifo"
	mkfifo "$fifo"
	"$@" >"$JO_T/held.out" 2>"$JO_T/held.err" &
	HELD=$!
	for i in $(seq 1 200); do
		[ -e "/proc/$HELD/wchan" ] || jo_die "$1 ended early: $(cat "$JO_T/held.err")"
		[ "$(cat "/proc/$HELD/wchan" 2>/dev/null)" = wait_for_partner ] && return 0
		sleep 0.05
	done
	jo_die "$1 never waited for $fifo: $(cat "$JO_T/held.err")"
}
# release FIFO: let the held command go on (an empty stream) and wait for it
release() {
	local rc=0
	exec 7>"$1"
	exec 7>&-
	wait "$HELD" || rc=$?
	return $rc
}
# cmdline PID OUT: /proc/PID/cmdline as user nobody reads it, NULs as '|'
cmdline() {
	setpriv --reuid=65534 --regid=65534 --clear-groups cat "/proc/$1/cmdline" | tr '\0' '|' >"$2"
}

# ---------------------------------------------------------------- 1. warmup, long secrets
F=$JO_T/ranges
held "$F" "$JO_BIN" warmup "redis://:$PW@$HP/1" --dry-run --ranges "$F" --secret-key "$SK" --secret-key=ab
cmdline $HELD "$JO_T/c1"
want="$JO_BIN warmup redis://:****@$HP/1 --dry-run --ranges $F --secret-key **** --secret-key=****|"
[ "$(cat "$JO_T/c1")" = "$want" ] || jo_die "cmdline: '$(cat "$JO_T/c1")', want '$want'"
ps -o args= -p $HELD | grep -qF "redis://:****@$HP/1 " || jo_die "ps: $(ps -o args= -p $HELD)"
for s in "$PW" "${PW:0:8}" "${PW:16:8}" "${PW: -8}" "$SK" "${SK:10:8}"; do
	! grep -qF "$s" "$JO_T/c1" || jo_die "'$s' shows in the cmdline: $(cat "$JO_T/c1")"
done
release "$F" || jo_die "warmup with the password failed: $(cat "$JO_T/held.err")"
grep -q 'blocks 0' "$JO_T/held.out" || jo_die "warmup: $(cat "$JO_T/held.out" "$JO_T/held.err")"
jo_log "40-character password, 33- and 2-character keys: $(cat "$JO_T/c1")"

# ---------------------------------------------------------------- 2. another length
held "$F" "$JO_BIN" warmup "redis://:$PW2@$HP/1" --dry-run --ranges "$F" --secret-key "$SK" --secret-key=ab
cmdline $HELD "$JO_T/c2"
cmp -s "$JO_T/c1" "$JO_T/c2" || jo_die "a 7-character password shows otherwise: '$(cat "$JO_T/c2")' vs '$(cat "$JO_T/c1")'"
release "$F" || jo_die "warmup with the second password failed: $(cat "$JO_T/held.err")"
jo_log "a 7-character password: the same cmdline, byte for byte"

# ---------------------------------------------------------------- 3. sync
mkdir -p "$JO_T/a" "$JO_T/b"
held "$F" "$JO_BIN" sync "$JO_T/a/" "$JO_T/b/" --src-secret-key "$SK" --dst-secret-key="$PW" \
	--cluster "redis://:$PW@$HP/2" --filter-from "$F"
cmdline $HELD "$JO_T/c3"
want="$JO_BIN sync $JO_T/a/ $JO_T/b/ --src-secret-key **** --dst-secret-key=**** --cluster redis://:****@$HP/2 --filter-from $F|"
[ "$(cat "$JO_T/c3")" = "$want" ] || jo_die "sync cmdline: '$(cat "$JO_T/c3")', want '$want'"
kill $HELD
wait $HELD 2>/dev/null || true
jo_log "sync: $(cat "$JO_T/c3")"

# ---------------------------------------------------------------- 4. no secrets
held "$F" "$JO_BIN" sync "$JO_T/a/" "$JO_T/b/" --filter-from "$F"
cmdline $HELD "$JO_T/c4"
[ "$(cat "$JO_T/c4")" = "$JO_BIN|sync|$JO_T/a/|$JO_T/b/|--filter-from|$F|" ] ||
	jo_die "a command line without secrets changed: $(cat "$JO_T/c4")"
kill $HELD
wait $HELD 2>/dev/null || true
echo "ok cli_password_mask"
