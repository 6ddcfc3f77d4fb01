#!/usr/bin/env bash
# kv_etcd.sh: the etcd transport of the tkv family (common/meta/tkv/etcd.c)
# against real etcd 3.4 servers on loopback, driven by tests/tools/kv_probe.c
# (built here against the build's libjo_common.a) and checked with etcdctl:
# put/get/delete, read-your-writes, conflicts (a key read changed by
# another client, a key inserted into or deleted from a range read), no
# conflict for unrelated keys, etcd's limits refused before anything is
# sent, a 5000-key snapshot scan that does not see writes made during it and
# fails when its revision is compacted, auth (token renewal, wrong password,
# permissions), TLS (CA, wrong CA, server-name, client certificates), a dead
# first endpoint, an endpoint that dies mid-session, unreachable servers,
# and a stalled server (the call times out, never hangs).
#   JO_PORT_BASE=8100 bash tests/integration/kv_etcd.sh
# run_all: asan
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/../lib/engines.sh"
jo_setup

BUILD=${JO_BUILD_DIR:-${BUILD:-$JO_REPO/build}}
[ -f "$BUILD/libjo_common.a" ] || jo_die "$BUILD/libjo_common.a missing (build first, or set BUILD)"
SAN=()
if grep -q '^JO_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
	SAN=(-fsanitize=address,undefined -fno-omit-frame-pointer)
fi
PROBE=$JO_T/kv_probe
# shellcheck disable=SC2046 # pkg-config prints several words
cc -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Werror -Wshadow -Wformat=2 \
	-Wno-missing-field-initializers -g "${SAN[@]}" -I"$JO_REPO" "$JO_REPO/tests/tools/kv_probe.c" \
	"$BUILD/libjo_common.a" $(pkg-config --libs libcurl jansson hiredis sqlite3 libcrypto libpq libmariadb) \
	-lpthread -lm -o "$PROBE" || jo_die "cannot build kv_probe"

FAILS=0
fail() {
	echo "FAIL: $*" >&2
	FAILS=$((FAILS + 1))
}

# probe URL NAME < script: run kv_probe; its output in $JO_T/NAME.out
probe() {
	local url=$1 name=$2 rc=0
	"$PROBE" "$url" >"$JO_T/$name.out" 2>"$JO_T/$name.err" || rc=$?
	if [ $rc != 0 ]; then
		cat "$JO_T/$name.out" "$JO_T/$name.err" >&2
		jo_die "kv_probe $name exited $rc"
	fi
	OUT=$JO_T/$name.out
}
# has LINE WHAT: the last probe printed exactly LINE
has() {
	grep -qxF -- "$1" "$OUT" || { fail "$2: no line '$1' in $(basename "$OUT"):"; sed 's/^/    /' "$OUT" >&2; }
}
# hasre REGEX WHAT: a line of the last probe matches REGEX
hasre() {
	grep -qE -- "$1" "$OUT" || { fail "$2: nothing matches /$1/ in $(basename "$OUT"):"; sed 's/^/    /' "$OUT" >&2; }
}
lacks() {
	! grep -qF -- "$1" "$OUT" || { fail "$2: '$1' printed in $(basename "$OUT"):"; sed 's/^/    /' "$OUT" >&2; }
}

engine_start etcd
E=$JO_ETCD_ENGINE_PORT
URL=etcd://127.0.0.1:$E/t
ctl() { jo_etcdctl "$E" "$@"; }
K() { printf '/t\375%s' "$1"; } # a key of volume prefix /t, as raw bytes for etcdctl
val() { ctl get --print-value-only "$(K "$1")"; }
present() { [ -n "$(ctl get --keys-only "$(K "$1")")" ]; }
revision() { ctl endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])'; }
CTL="ETCDCTL_API=3 etcdctl ${JO_ETCD_CTL[$E]}"

# the test bed's naming of etcd volumes: a prefix per volume, unused
engine_meta etcd vol1
[ "$JO_META" = "etcd://127.0.0.1:$E/vol1" ] || fail "engine_meta etcd: $JO_META"
engine_store etcd vol1
[ "$JO_STORE" = "file:$JO_T/bucket-vol1" ] || fail "engine_store etcd: $JO_STORE"
ctl put "$(printf '/used2\375setting')" x >/dev/null
engine_meta etcd used # "/used" + 0xFD is not "/used2" + 0xFD
[ "$JO_META" = "etcd://127.0.0.1:$E/used" ] || fail "engine_meta etcd used: $JO_META"
ctl put "$(printf '/used\375setting')" x >/dev/null
(engine_meta etcd used) 2>/dev/null && fail "engine_meta etcd accepts a prefix in use"
(engine_meta etcd 'a b') 2>/dev/null && fail "engine_meta etcd accepts a name that is no URL path"
ctl del --prefix /used >/dev/null

# ---------------------------------------------------------------- basics
jo_log "put, get, delete, version"
ctl put "$(K b)" old >/dev/null
probe "$URL" basic <<'EOF'
version
begin
get /t\xfda
put /t\xfda 1
put /t\xfdempty rep:0:x
commit
begin
get /t\xfda
get /t\xfdempty
get /t\xfdb
del /t\xfdb
get /t\xfdb
commit
begin
commit
EOF
has "connect ok" "connect"
hasre '^version etcd 3\.4\.[0-9]+$' "version"
has 'get /t\xfda absent' "get of a missing key"
has 'get /t\xfda = 1' "get after commit"
has 'get /t\xfdempty = ' "an empty value is present"
has 'get /t\xfdb = old' "get of a key etcdctl wrote"
has 'get /t\xfdb absent' "a deleted key reads as absent in its transaction"
[ "$(grep -c '^commit ok$' "$OUT")" = 3 ] || fail "basic: three commits"
[ "$(val a)" = 1 ] || fail "etcd holds a=1"
present empty || fail "etcd holds the empty value"
! present b || fail "b was deleted"
r0=$(revision)
probe "$URL" ro <<'EOF'
begin
get /t\xfda
scan /t\xfd /t\xfe 0
commit
EOF
has "commit ok" "read-only commit"
[ "$(revision)" = "$r0" ] || fail "a read-only transaction wrote something"

# ---------------------------------------------------------------- read-your-writes
jo_log "read-your-writes"
ctl put "$(K rx)" server >/dev/null
ctl put "$(K wd)" old >/dev/null
probe "$URL" ryw <<'EOF'
begin
put /t\xfdryw1 x
get /t\xfdryw1
del /t\xfda
get /t\xfda
put /t\xfdryw2 y
del /t\xfdryw2
get /t\xfdryw2
put /t\xfdwd new
del /t\xfdwd
get /t\xfdwd
scan /t\xfd /t\xfe 0
delrange /t\xfdr /t\xfds
get /t\xfdryw1
get /t\xfdrx
put /t\xfdrz z
scan /t\xfdr /t\xfds 0
commit
EOF
has 'get /t\xfdryw1 = x' "a buffered put reads back"
has 'get /t\xfda absent' "a buffered delete hides the stored key"
has 'get /t\xfdryw2 absent' "put then delete reads absent"
has 'get /t\xfdwd absent' "put then delete of a stored key reads absent"
cat >"$JO_T/ryw.want" <<'EOF'
scan /t\xfdempty = 
scan /t\xfdrx = server
scan /t\xfdryw1 = x
scan n=3
delrange ok
get /t\xfdryw1 absent
get /t\xfdrx absent
put ok
scan /t\xfdrz = z
scan n=1
commit ok
EOF
sed -n '/^scan /,$p' "$OUT" >"$JO_T/ryw.got"
cmp -s "$JO_T/ryw.got" "$JO_T/ryw.want" || { fail "scans see the transaction's writes"; diff "$JO_T/ryw.want" "$JO_T/ryw.got" >&2 || true; }
has "commit ok" "read-your-writes commit (a put inside a delete range)"
! present a || fail "a deleted at commit"
! present ryw1 || fail "ryw1 deleted by the range"
! present ryw2 || fail "ryw2 (put then deleted) is absent"
! present wd || fail "wd (stored, put, then deleted) ends deleted"
! present rx || fail "rx deleted by the range"
[ "$(val rz)" = z ] || fail "rz put inside the deleted range survives"

# a scan with a limit pages past keys the transaction deleted
probe "$URL" hseed <<'EOF'
begin
putn /t\xfdH/ 100 v
commit
EOF
has "commit ok" "seed H"
probe "$URL" hidden <<'EOF'
begin
delrange /t\xfdH/ /t\xfdH/00090
scan /t\xfdH/ /t\xfdH0 5 keys
commit
EOF
grep '^scan ' "$OUT" >"$JO_T/hidden.got" || true
printf 'scan /t\\xfdH/%05d\n' 90 91 92 93 94 >"$JO_T/hidden.want"
echo "scan n=5" >>"$JO_T/hidden.want"
cmp -s "$JO_T/hidden.got" "$JO_T/hidden.want" || { fail "limited scan past deleted keys"; diff "$JO_T/hidden.want" "$JO_T/hidden.got" >&2 || true; }
has "commit ok" "commit after the limited scan"
[ "$(ctl get --prefix --keys-only "$(K H/)" | grep -c . || true)" = 10 ] || fail "90 H keys deleted by the range"

# ---------------------------------------------------------------- conflicts
jo_log "conflicts"
ctl put "$(K c1)" orig >/dev/null
probe "$URL" conflict <<EOF
begin
get /t\xfdc1
sh $CTL put \$(printf '/t\375c1') changed >/dev/null
put /t\xfdc2 v
commit
begin
get /t\xfdnew1
sh $CTL put \$(printf '/t\375new1') born >/dev/null
put /t\xfdc3 v
commit
begin
get /t\xfdc1
sh $CTL del \$(printf '/t\375c1') >/dev/null
put /t\xfdc4 v
commit
begin
get /t\xfdnew2
get /t\xfdnew2
put /t\xfdnew2 mine
sh $CTL put \$(printf '/t\375new2') theirs >/dev/null
get /t\xfdnew2
commit
EOF
[ "$(grep -c '^ERR ECONFLICT ' "$OUT")" = 4 ] || { fail "four conflicts (changed, created, deleted, blind re-read)"; cat "$OUT" >&2; }
lacks "commit ok" "no conflicting commit succeeds"
for k in c2 c3 c4; do ! present $k || fail "$k written by a conflicting transaction"; done
[ "$(val new2)" = theirs ] || fail "new2 keeps the other client's value"

ctl put "$(K p/a)" 1 >/dev/null
ctl put "$(K p/b)" 2 >/dev/null
ctl put "$(K p/c)" 3 >/dev/null
# range_conflict N SCAN CHANGE: a transaction that scans p/ (SCAN: limit and
# mode), has etcdctl make CHANGE inside the range, then writes outN.
range_conflict() {
	cat <<EOF
begin
scan /t\xfdp/ /t\xfdp0 $2
sh $CTL $3 >/dev/null
put /t\xfdout$1 y
commit
EOF
}
probe "$URL" phantom < <(
	range_conflict 1 0 "put \$(printf '/t\375p/new') x"
	range_conflict 2 "0 keys" "del \$(printf '/t\375p/new')"
	range_conflict 3 0 "put \$(printf '/t\375p/b') 22"
	range_conflict 4 2 "put \$(printf '/t\375p/aa') x"
)
[ "$(grep -c '^ERR ECONFLICT ' "$OUT")" = 4 ] || { fail "four range conflicts (insert, delete, update, insert below a limit)"; cat "$OUT" >&2; }
for k in out1 out2 out3 out4; do ! present $k || fail "$k written by a conflicting transaction"; done

probe "$URL" unrelated <<EOF
begin
get /t\xfdc2
scan /t\xfdp/ /t\xfdp0 2
sh $CTL put \$(printf '/t\375p/zz') beyond-the-limit >/dev/null
sh $CTL put \$(printf '/t\375p1') outside >/dev/null
sh $CTL put \$(printf '/t\375unrelated') z >/dev/null
put /t\xfdout5 y
commit
EOF
has "commit ok" "changes outside what was read do not conflict"
[ "$(val out5)" = y ] || fail "out5 committed"

# ---------------------------------------------------------------- limits
jo_log "limits: 128 compares and operations, 1.5 MiB"
probe "$URL" seedL <<'EOF'
begin
putn /t\xfdL/ 128 v
commit
begin
putn /t\xfdL/ 128 v 128
commit
EOF
[ "$(grep -c '^commit ok$' "$OUT")" = 2 ] || fail "seed L"
probe "$URL" limit_ok <<'EOF'
begin
getn /t\xfdL/ 128
putn /t\xfdW/ 128 w
commit
EOF
has "commit ok" "128 compares and 128 puts fit one Txn"
[ "$(val W/00127)" = w ] || fail "W/00127 written"
r0=$(revision)
probe "$URL" limits <<'EOF'
begin
getn /t\xfdL/ 128
get /t\xfdL/00128
abort
begin
scan /t\xfdL/ /t\xfdL0 0 keys
abort
begin
getn /t\xfdL/ 127
scan /t\xfdp/ /t\xfdp0 0
abort
begin
putn /t\xfdX/ 129 x
commit
begin
get /t\xfdL/00000
put /t\xfdbig rep:1600000:b
commit
begin
delrange /t\xfdL/00000 /t\xfdL/00200
putn /t\xfdL/ 64 again 10
putn /t\xfdL/ 64 again 100
commit
EOF
[ "$(grep -c '^ERR EINVAL etcd: the transaction reads more than 128 keys and ranges' "$OUT")" = 3 ] ||
	{ fail "129 reads refused (get, scan, scan after gets)"; cat "$OUT" >&2; }
hasre '^ERR EINVAL etcd: the transaction has 129 writes, over the 128 operations etcd takes in one Txn .*nothing was sent$' "129 writes refused"
hasre '^ERR EINVAL etcd: the transaction is [0-9]+ bytes, over the [0-9]+ etcd takes in one request' "1.6 MB refused"
# the delete range cut around 128 puts inside it needs 129 deletes + 128 puts
hasre '^ERR EINVAL etcd: the transaction has 2[0-9][0-9] writes' "a delete range split around puts counts every piece"
lacks "commit ok" "no over-limit transaction commits"
[ "$(revision)" = "$r0" ] || fail "an over-limit transaction reached etcd (revision $r0 -> $(revision))"
! present X/00000 || fail "X written"
probe "$URL" big_ok <<'EOF'
begin
put /t\xfdbig rep:1000000:b
commit
EOF
has "commit ok" "a 1 MB value fits"

# ---------------------------------------------------------------- snapshot scans
jo_log "snapshot scan of 5000 keys"
for i in $(seq 0 39); do
	printf 'begin\nputn /t\\xfdS/ 125 v %d\ncommit\n' $((i * 125))
done >"$JO_T/seedS.in"
probe "$URL" seedS <"$JO_T/seedS.in"
[ "$(grep -c '^commit ok$' "$OUT")" = 40 ] || fail "seed 5000 S keys"
hook="$CTL put \$(printf '/t\375S/04000') CHANGED >/dev/null && $CTL del \$(printf '/t\375S/04500') >/dev/null && $CTL put \$(printf '/t\375S/09999') NEW >/dev/null && $CTL put \$(printf '/t\375S/00000x') NEW >/dev/null"
probe "$URL" snap <<EOF
snap /t\xfdS/ /t\xfdS0 values - 1500 $hook
EOF
has "snap hook rc=0" "the pause hook ran"
hasre '^snap n=5000 rev=[0-9]+$' "5000 keys at one revision"
has 'snap /t\xfdS/04000 = v' "a key changed mid-scan is seen as it was"
has 'snap /t\xfdS/04500 = v' "a key deleted mid-scan is seen as it was"
lacks 'S/09999' "a key created mid-scan is not seen"
lacks 'S/00000x' "a key created mid-scan is not seen"
{ grep '^snap /' "$OUT" || true; } | sed 's/ = .*//' >"$JO_T/snap.keys"
printf 'snap /t\\xfdS/%05d\n' $(seq 0 4999) >"$JO_T/snap.want"
cmp -s "$JO_T/snap.keys" "$JO_T/snap.want" || fail "the snapshot lists S/00000..S/04999 in order"
srev=$(sed -n 's/^snap n=5000 rev=//p' "$OUT")
[ -n "$srev" ] || jo_die "no snapshot revision: the checks below need it"
[ "$(val S/04000)" = CHANGED ] || fail "the hook changed S/04000"
probe "$URL" snap_pinned <<EOF
snap /t\xfdS/ /t\xfdS0 keys $srev
snap /t\xfdS/ /t\xfdS0 keys -
EOF
has "snap n=5000 rev=$srev" "a pinned snapshot scan reads that revision"
lacks 'snap /t\xfdS/04000 = ' "keys only: no values"
hasre '^snap n=5001 rev=[0-9]+$' "a new snapshot sees the writes (5000 - 1 deleted + 2 created)"

jo_log "a compacted revision mid-scan"
compact="$CTL compact \$($CTL endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0][\"Status\"][\"header\"][\"revision\"])') >/dev/null"
probe "$URL" snap_compact <<EOF
snap /t\xfdS/ /t\xfdS0 values - 1500 $CTL put \$(printf '/t\375S/00001') bump >/dev/null && $compact
snap /t\xfdS/ /t\xfdS0 keys $srev
EOF
has "snap hook rc=0" "compaction ran mid-scan"
hasre "^ERR EIO etcd 127\.0\.0\.1:$E: snapshot scan at revision [0-9]+: etcdserver: mvcc: required revision has been compacted \(after [0-9]+ keys: the listing is incomplete\)$" "compaction mid-scan is an error"
hasre '^snap partial n=(1[5-9][0-9][0-9]|20[0-4][0-9])$' "the scan stopped after the page it was in"
has "ERR EIO etcd 127.0.0.1:$E: snapshot scan at revision $srev: etcdserver: mvcc: required revision has been compacted" "a pinned scan at a compacted revision fails at once"
has "snap partial n=0" "nothing listed from a compacted revision"
lacks "snap n=" "no complete listing after compaction"

# ---------------------------------------------------------------- endpoints
DEAD=$((JO_PORT_BASE + 40))
jo_port_busy "$DEAD" && jo_die "port $DEAD is in use"
jo_log "endpoints: a dead first one, one dying mid-session, unreachable servers"
probe "etcd://127.0.0.1:$DEAD,127.0.0.1:$E/t" deadfirst <<'EOF'
begin
get /t\xfdout5
put /t\xfdvia2 yes
commit
EOF
has "connect ok" "a dead first endpoint is skipped"
has 'get /t\xfdout5 = y' "read through the second endpoint"
has "commit ok" "commit through the second endpoint"
[ "$(val via2)" = yes ] || fail "via2 written"

X=$((JO_PORT_BASE + 30))
start_etcd "$X"
XPID=$JO_ETCD_PID
probe "etcd://127.0.0.1:$X,127.0.0.1:$E/t" failover <<EOF
begin
get /t\xfdout5
sh kill -TERM $XPID; while kill -0 $XPID 2>/dev/null; do sleep 0.1; done
get /t\xfdvia2
begin
put /t\xfdvia3 yes
commit
EOF
has 'get /t\xfdout5 absent' "the first endpoint (another, empty cluster) answers first"
has 'get /t\xfdvia2 = yes' "a later failure moves to the next endpoint"
has "commit ok" "commit after failover"
[ "$(val via3)" = yes ] || fail "via3 written"

probe "etcd://127.0.0.1:$DEAD/t" unreachable </dev/null
hasre "^ERR ECONNECT etcd 127\.0\.0\.1:$DEAD: status: " "a server that is not there"
probe "etcd://127.0.0.1:$DEAD,127.0.0.1:$((DEAD + 1))/t" unreachable2 </dev/null
hasre "^ERR ECONNECT etcd 127\.0\.0\.1:$((DEAD + 1)) \(and every endpoint before it\): status: " "no endpoint answers"
probe "etcd://no-such-host.invalid:2379/t" nodns </dev/null
hasre '^ERR ECONNECT etcd no-such-host\.invalid:2379: ' "a name that does not resolve"

# ---------------------------------------------------------------- auth
jo_log "auth"
A=$((JO_PORT_BASE + 32))
start_etcd "$A" --auth rootpw --token-ttl 2
jo_etcdctl "$A" user add jfs:jfspw >/dev/null
jo_etcdctl "$A" role add jfsrole >/dev/null
jo_etcdctl "$A" role grant-permission jfsrole --prefix=true readwrite /t >/dev/null
jo_etcdctl "$A" user grant-role jfs jfsrole >/dev/null
probe "etcd://jfs:jfspw@127.0.0.1:$A/t" auth <<'EOF'
begin
put /t\xfda authed
commit
begin
get /t\xfda
sh sleep 4
get /t\xfdb
put /t\xfdb after-renewal
commit
version
begin
get /other
EOF
has "connect ok" "user and password"
[ "$(grep -c '^commit ok$' "$OUT")" = 2 ] || fail "auth: commits, the second after the token expired"
has 'get /t\xfda = authed' "read with a token"
has 'get /t\xfdb absent' "read after the token expired (renewed)"
hasre '^version etcd 3\.4\.' "version with auth"
hasre "^ERR EAUTH etcd 127\.0\.0\.1:$A: get: etcdserver: permission denied" "outside the user's prefix"
[ "$(jo_etcdctl "$A" get --print-value-only "$(K b)")" = after-renewal ] || fail "b written after renewal"
probe "etcd://jfs:WrOnGpw@127.0.0.1:$A/t" badpw </dev/null
hasre '^ERR EAUTH user "jfs": etcd 127\.0\.0\.1:[0-9]+: authenticate: .*authentication failed' "a wrong password"
lacks "WrOnGpw" "the password is never printed"
grep -q WrOnGpw "$JO_T/badpw.err" && fail "the password is on stderr"
probe "etcd://127.0.0.1:$A/t" nouser <<'EOF'
begin
get /t\xfda
EOF
hasre '^ERR EAUTH .*user name is empty \(the server has authentication on' "no user on a server with auth"

# ---------------------------------------------------------------- TLS
jo_log "TLS"
S=$((JO_PORT_BASE + 34))
start_etcd "$S" --tls
C=$JO_ETCD_CERTS
enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
probe "etcd://127.0.0.1:$S/t?cacert=$(enc "$C/ca.pem")" tls <<'EOF'
version
begin
put /t\xfdtls yes
commit
EOF
has "connect ok" "https with the CA (percent-encoded path)"
has "commit ok" "commit over https"
[ "$(jo_etcdctl "$S" get --print-value-only "$(K tls)")" = yes ] || fail "tls written"
probe "etcd://127.0.0.1:$S/t?cacert=$C/other-ca.pem" tls_wrongca </dev/null
hasre "^ERR ECONNECT etcd 127\.0\.0\.1:$S: status: .*(certificate|SSL)" "a wrong CA"
probe "etcd://127.0.0.1:$S/t?cacert=$C/other-ca.pem&insecure-skip-verify=true" tls_insecure </dev/null
has "connect ok" "insecure-skip-verify"
probe "etcd://127.0.0.1:$S/t?cacert=$C/ca.pem&server-name=localhost" tls_sni <<'EOF'
begin
get /t\xfdtls
EOF
has 'get /t\xfdtls = yes' "server-name names the certificate (connecting to 127.0.0.1)"
probe "etcd://127.0.0.1:$S/t?cacert=$C/ca.pem&server-name=wrong.example" tls_badsni </dev/null
hasre '^ERR ECONNECT .*status: ' "a server-name the certificate does not hold"
M=$((JO_PORT_BASE + 36))
start_etcd "$M" --client-certs
probe "etcd://127.0.0.1:$M/t?cacert=$C/ca.pem" mtls_none </dev/null
hasre '^ERR ECONNECT ' "no client certificate where one is required"
probe "etcd://127.0.0.1:$M/t?cacert=$C/ca.pem&cert=$C/server.pem&key=$C/server.key" mtls <<'EOF'
begin
put /t\xfdmtls yes
commit
EOF
has "commit ok" "a client certificate"

# ---------------------------------------------------------------- a stalled server
jo_log "a stalled server (about 60 s)"
EPID=${JO_ETCD_PIDS[0]}
ps -o args= -p "$EPID" | grep -q -- "--listen-client-urls http://127.0.0.1:$E" || jo_die "pid $EPID is not the etcd on port $E"
t0=$(date +%s)
probe "$URL" stalled <<EOF
begin
get /t\xfdout5
sh kill -STOP $EPID && sleep 0.2 && ps -o stat= -p $EPID | grep -q T
get /t\xfdvia2
sh kill -CONT $EPID
get /t\xfdvia3
EOF
dt=$(($(date +%s) - t0))
grep -m1 '^sh rc=' "$OUT" | grep -qx 'sh rc=0' || fail "etcd (pid $EPID) was not stopped"
hasre "^ERR ETIMEOUT etcd 127\.0\.0\.1:$E: get: " "a stalled server times out"
has 'get /t\xfdvia3 = yes' "the connection works once the server is back"
[ "$dt" -ge 55 ] && [ "$dt" -le 90 ] || fail "the stalled call took $dt s (want about 60)"

if [ "$FAILS" != 0 ]; then
	echo "kv_etcd: $FAILS check(s) FAILED" >&2
	exit 1
fi
echo "kv_etcd: PASS"
