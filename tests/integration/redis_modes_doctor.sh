#!/usr/bin/env bash
# jfsops doctor on Redis as production runs it: volumes formatted by the real
# juicefs on a standalone, a TLS (rediss://), a Sentinel and a Cluster Redis.
# doctor names the mode it found (standalone; TLS with the server
# certificate's subject; sentinel with the master's name and address; cluster
# with the slot and the node serving it, checked against CLUSTER SLOTS), and
# pinpoints what is wrong: a CA that did not sign the server certificate, a
# server name the certificate does not hold, a master name no sentinel
# monitors (naming the ones they do), a wrong SENTINEL_PASSWORD; client
# certificates (mTLS) and insecure-skip-verify work as juicefs takes them.
# run_all: asan
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
. "$here/../lib/engines.sh"
jo_setup

# doc CASE WANT_EXIT PATTERN [juicefs-env...] -- URL: doctor's exit code and
# its metadata line (detail and hint) must match.
doc() {
	local case=$1 want=$2 pat=$3 url=$4 rc=0
	"$JO_BIN" doctor "$url" >"$JO_T/doc-$case.txt" 2>&1 || rc=$?
	if [ "$rc" != "$want" ] || ! grep -A2 '^\(ok\|FAIL\|fail\) *metadata' "$JO_T/doc-$case.txt" | grep -Eq -- "$pat"; then
		cat "$JO_T/doc-$case.txt" >&2
		jo_die "doctor $case: exit $rc (want $want), or no line matching '$pat'"
	fi
	if grep -q "$JO_RS_PASS\|$JO_SENT_PASS" "$JO_T/doc-$case.txt"; then
		jo_die "doctor $case: a password is in its output"
	fi
	echo "doctor $case: exit $rc: $(grep -m1 -E -o -- "$pat" "$JO_T/doc-$case.txt")" >&2
}

for e in redis redis-tls redis-sentinel redis-cluster; do
	engine_start $e
	engine_meta $e "dm_${e//-/_}"
	engine_store $e "dm-$e"
	jfs_format "$JO_META" "$JO_BUCKET" "dm-$e" --trash-days 0 >/dev/null
	eval "META_${e//-/_}=\$JO_META"
done

# ---- standalone
doc standalone 0 "server Redis [0-9.]+ \(standalone at 127\.0\.0\.1:$JO_REDIS_PORT\)" "$META_redis"

# ---- TLS
C=$JO_RTLS_CERTS
tls=$META_redis_tls
base=${tls%%\?*}
doc tls 0 "standalone at 127\.0\.0\.1:$JO_RTLS_PORT, TLS: server certificate /CN=127\.0\.0\.1" "$tls"
doc tls-mtls 0 "TLS: server certificate /CN=127\.0\.0\.1" \
	"$base?tls-ca-cert-file=$C/ca.pem&tls-cert-file=$C/server.pem&tls-key-file=$C/server.key"
doc tls-bad-ca 5 "did not verify against $C/other-ca\.pem: .*(unable to get local issuer|self.signed)" \
	"$base?tls-ca-cert-file=$C/other-ca.pem"
grep -q "hint: TLS: tls-ca-cert-file must name the CA" "$JO_T/doc-tls-bad-ca.txt" || jo_die "doctor tls-bad-ca: no TLS hint"
grep -q "subject /CN=127.0.0.1, issuer /CN=jfsops test CA" "$JO_T/doc-tls-bad-ca.txt" ||
	jo_die "doctor tls-bad-ca: the refused certificate is not named"
doc tls-skip-verify 0 "not verified: insecure-skip-verify" "$base?tls-ca-cert-file=$C/other-ca.pem&insecure-skip-verify=true"
doc tls-server-name 5 "is not for wrong\.example" "$base?tls-ca-cert-file=$C/ca.pem&tls-server-name=wrong.example"
doc tls-server-name-ok 0 "TLS: server certificate" "$base?tls-ca-cert-file=$C/ca.pem&tls-server-name=localhost"
doc tls-plain-port 5 "TLS handshake with 127\.0\.0\.1:$JO_REDIS_PORT failed" "rediss://127.0.0.1:$JO_REDIS_PORT/1"
# juicefs agrees on what it takes and refuses
"$JUICEFS" status --no-agent "$base?tls-ca-cert-file=$C/ca.pem&tls-cert-file=$C/server.pem&tls-key-file=$C/server.key" >/dev/null 2>&1 ||
	jo_die "juicefs refuses the mTLS URL doctor accepted"
if timeout 60 "$JUICEFS" status --no-agent "$base?tls-ca-cert-file=$C/other-ca.pem" >/dev/null 2>&1; then
	jo_die "juicefs accepts the CA doctor refused"
fi

# ---- Sentinel
set -- $JO_SENT_PORTS
master=$(jo_rs_master)
doc sentinel 0 "sentinel: master '$JO_RS_MASTER' at 127\.0\.0\.1:$master, 1 replica" "$META_redis_sentinel"
wrong=${META_redis_sentinel/@$JO_RS_MASTER,/@nosuchmaster,}
doc sentinel-wrong-name 8 "monitors no master named 'nosuchmaster' \(it monitors: $JO_RS_MASTER\)" "$wrong"
grep -q "hint: no sentinel monitors a master of that name" "$JO_T/doc-sentinel-wrong-name.txt" ||
	jo_die "doctor sentinel-wrong-name: no hint"
SENTINEL_PASSWORD=wrong doc sentinel-wrong-password 11 "refused SENTINEL_PASSWORD" "$META_redis_sentinel"
grep -q "SENTINEL_PASSWORD the sentinels'" "$JO_T/doc-sentinel-wrong-password.txt" || jo_die "doctor sentinel-wrong-password: no hint"
# one sentinel down: the others answer
kill -STOP "$(cat "$JO_T/sentinel-$1/sentinel.pid")"
doc sentinel-one-down 0 "sentinel: master '$JO_RS_MASTER'" "$META_redis_sentinel"
kill -CONT "$(cat "$JO_T/sentinel-$1/sentinel.pid")"
# a read-only command with route-read=replica reads from the replica
ro=$("$JO_BIN" info "$META_redis_sentinel?route-read=replica" --json) || jo_die "info via the replica failed"
rw=$("$JO_BIN" info "$META_redis_sentinel" --json) || jo_die "info failed"
[ "$ro" = "$rw" ] || jo_die "info through the replica differs from the master's"

# ---- Cluster
cl=$META_redis_cluster
db=${cl##*/}
set -- $JO_RC_PORTS
slot=$(redis-cli -p "$1" cluster keyslot "{$db}")
owner=$(redis-cli -p "$1" cluster slots | python3 -c '
import sys
l = sys.stdin.read().split()
for i in range(0, len(l), 5):
    if int(l[i]) <= int(sys.argv[1]) <= int(l[i + 1]):
        print(l[i + 3])
' "$slot")
doc cluster 0 "cluster: slot $slot of key prefix \{$db\} served by 127\.0\.0\.1:$owner" "$cl"
# one seed is enough, and a seed that does not own the slot is fine
for p in $JO_RC_PORTS; do
	doc "cluster-seed-$p" 0 "served by 127\.0\.0\.1:$owner" "redis://127.0.0.1:$p/$db"
done
# every key of the volume carries the {DB} hash tag, as juicefs writes them
n=$(redis-cli -p "$owner" --scan --pattern "*" | grep -vc "^{$db}" || true)
[ "$n" = 0 ] || jo_die "cluster: $n keys on the slot's node without the {$db} prefix"
echo "redis_modes_doctor: ok"
