#!/usr/bin/env bash
# jfsops doctor against real services: a healthy volume gives all "ok" and
# exit 0; each broken setup gives a FAIL line naming the problem, a hint,
# and its own exit code:
#   wrong Redis password 11, wrong S3 secret 6, unreachable endpoint 5,
#   bucket missing 8, skewed clock (libfaketime: +2h refused by SigV4, +12m
#   measured from the probe object's Last-Modified) 12, encrypted volume 9;
#   a config file readable by others that holds a secret 2.
# Also: a profile's path_style/list_v1 reach a volume command (leakcheck's
# LIST requests seen with strace).
# Ports: JO_PORT_BASE +0 and +1 (redis; the second with a password),
# SeaweedFS +10..+13, +5 left closed (the unreachable endpoint).
JO_PORT_BASE=${JO_PORT_BASE:-9660}
. "$(dirname "$0")/lib/init.sh"
B=$JO_BIN
command -v faketime >/dev/null || jo_die "faketime is not installed (apt-get install faketime; tests/install.sh)"
command -v openssl >/dev/null || jo_die "openssl is not installed"

start_redis "${JO_DOCTOR_REDIS:-$((JO_PORT_BASE + 0))}"
R1=$JO_REDIS_PORT
start_redis "${JO_DOCTOR_REDIS_PW:-$((JO_PORT_BASE + 1))}" --requirepass docpw
R2=$JO_REDIS_PORT
start_seaweed "${JO_DOCTOR_SEAWEED:-$((JO_PORT_BASE + 10))}"
DEAD=${JO_DOCTOR_DEAD_PORT:-$((JO_PORT_BASE + 5))}
jo_port_busy "$DEAD" && jo_die "port $DEAD should be closed for the unreachable-endpoint case"
s3_mkbucket dochealthy
s3_mkbucket docenc
s3_mkbucket docempty

GOOD="redis://127.0.0.1:$R1/1"
jfs_format "$GOOD" "$JO_S3_ENDPOINT/dochealthy" dochealthy
mkdir -p "$JO_T/src"
for i in 1 2 3; do head -c $((i * 300000)) /dev/urandom >"$JO_T/src/f$i"; done
jfs_sync_in "$JO_T/src" "$GOOD"
PWMETA="redis://:docpw@127.0.0.1:$R2/1"
jfs_format "$PWMETA" "$JO_S3_ENDPOINT/dochealthy" docauth
openssl genrsa -out "$JO_T/enc.pem" 2048 2>/dev/null
ENC="redis://127.0.0.1:$R1/2"
jfs_format "$ENC" "$JO_S3_ENDPOINT/docenc" docenc --encrypt-rsa-key "$JO_T/enc.pem"
# a volume whose stored secret is wrong (juicefs format would refuse it)
BADKEY="redis://127.0.0.1:$R1/3"
JFS_NO_CHECK_OBJECT_STORAGE=1 jfs_format "$BADKEY" "$JO_S3_ENDPOINT/dochealthy" docbadkey \
	--access-key "$JO_S3_AK" --secret-key wrong-secret

fails=0
# run_doctor NAME WANT_EXIT CHECK REGEX [jfsops prefix/args...]: the output must have
# a FAIL line for CHECK whose text matches REGEX, a hint line, and exit WANT_EXIT
run_case() {
	local name=$1 want=$2 check=$3 re=$4 rc=0
	shift 4
	"$@" >"$JO_T/$name.out" 2>"$JO_T/$name.err" || rc=$?
	local ok=1
	[ "$rc" = "$want" ] || { echo "FAIL $name: exit $rc, want $want"; ok=0; }
	if [ "$want" = 0 ]; then
		grep -qE '^(FAIL|warn) ' "$JO_T/$name.out" && { echo "FAIL $name: not all ok"; ok=0; }
		[ "$(grep -cE '^ok |"result":"ok"' "$JO_T/$name.out")" -ge 8 ] || { echo "FAIL $name: fewer than 8 ok lines"; ok=0; }
	else
		grep -qE "^FAIL +$check .*($re)" "$JO_T/$name.out" ||
			{ echo "FAIL $name: no 'FAIL $check' line matching /$re/"; ok=0; }
		grep -A1 -E "^FAIL +$check " "$JO_T/$name.out" | grep -q '^      hint: ' ||
			{ echo "FAIL $name: the FAIL line has no hint"; ok=0; }
	fi
	if [ $ok = 0 ]; then
		fails=$((fails + 1))
		sed 's/^/    | /' "$JO_T/$name.out" "$JO_T/$name.err"
	else
		echo "ok   $name (exit $rc)"
	fi
	# never print a secret
	if grep -qE 'docpw|wrong-secret|'"$JO_S3_SK" "$JO_T/$name.out" "$JO_T/$name.err"; then
		echo "FAIL $name: a secret appears in the output"
		fails=$((fails + 1))
	fi
}

run_case healthy 0 - - "$B" doctor "$GOOD"
run_case healthy-json 0 - - "$B" doctor "$GOOD" --json
grep -q '"type":"summary",.*"failed":0' "$JO_T/healthy-json.out" || { echo "FAIL healthy-json: no summary"; fails=$((fails + 1)); }
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$JO_T/healthy-json.out" ||
	{ echo "FAIL healthy-json: not JSON lines"; fails=$((fails + 1)); }
run_case redis-password 11 metadata 'password|auth|AUTH' "$B" doctor "redis://:wrongpw@127.0.0.1:$R2/1"
grep -q 'Redis' "$JO_T/redis-password.out" || { echo "FAIL redis-password: the hint does not name Redis"; fails=$((fails + 1)); }
run_case redis-password-ok 0 - - env REDIS_PASSWORD=docpw "$B" doctor "redis://127.0.0.1:$R2/1"
run_case s3-secret-flag 6 object-list 'Signature|Access|denied|credential|403' \
	"$B" doctor "$GOOD" --secret-key definitely-wrong
run_case s3-secret-stored 6 object-list 'Signature|Access|denied|credential|403' "$B" doctor "$BADKEY"
run_case unreachable 5 object-list 'connect|refused|unreachable' \
	"$B" doctor "$GOOD" --bucket "http://127.0.0.1:$DEAD/dochealthy"
run_case unreachable-meta 5 metadata 'connect|refused|unreachable' "$B" doctor "redis://127.0.0.1:$DEAD/1"
run_case bucket-missing 8 object-list 'NoSuchBucket|bucket|not exist|not found' \
	"$B" doctor "$GOOD" --bucket "$JO_S3_ENDPOINT/nosuchbucket"
# the referenced blocks are checked: an empty bucket in place of the volume's
# (emptied or replaced) fails, although it lists, reads and writes fine
grep -qE '^ok +blocks +the first block of 3 referenced slices is there' "$JO_T/healthy.out" ||
	{ echo "FAIL healthy: no 'ok blocks' line for the 3 files' slices"; fails=$((fails + 1)); }
run_case bucket-replaced 8 blocks '3 of 3 sampled referenced blocks are missing' \
	"$B" doctor "$GOOD" --bucket "$JO_S3_ENDPOINT/docempty"
# nothing of doctor's is left in the buckets (its probe objects are deleted,
# and no directory-like prefix of its own stays behind)
for b in dochealthy docempty; do
	if s3_list_keys "$b" | grep -q 'doctor'; then
		echo "FAIL leftovers: $b still holds: $(s3_list_keys "$b" | grep doctor | head -3)"
		fails=$((fails + 1))
	else
		echo "ok   leftovers: nothing of doctor's in $b"
	fi
done
# (an ASan build must tolerate libfaketime being preloaded before its runtime)
run_case clock-skew 12 clock-skew 'clock|skew|Skewed' \
	env ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" faketime -f '+2h' "$B" doctor "$GOOD"
# 12 minutes: the store still accepts signatures, the probe's Last-Modified shows the skew
run_case clock-skew-12m 12 clock-skew 'differs from the local clock' \
	env ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" faketime -f '+12m' "$B" doctor "$GOOD"
run_case encrypted 9 encryption 'encrypt' "$B" doctor "$ENC"
# a profile from the config file is used; a config readable by others is refused
mkdir -p "$JO_T/xdg/jfsops"
printf '[profile seaweed]\nbucket = %s/dochealthy\naccess_key = %s\nsecret_key = %s\n' \
	"$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" >"$JO_T/xdg/jfsops/config"
chmod 600 "$JO_T/xdg/jfsops/config"
run_case profile 0 - - env XDG_CONFIG_HOME="$JO_T/xdg" "$B" doctor "$BADKEY" --profile seaweed
chmod 644 "$JO_T/xdg/jfsops/config"
run_case config-loose 2 config 'readable by group or others' \
	env XDG_CONFIG_HOME="$JO_T/xdg" "$B" doctor "$GOOD" --profile seaweed

# a profile's list_v1 reaches volume commands: seen on the wire (strace of
# leakcheck's LIST requests), V2 without it, V1 with it
command -v strace >/dev/null || jo_die "strace is missing: run bash tests/install.sh"
for v1 in 0 1; do
	mkdir -p "$JO_T/xdg$v1/jfsops"
	printf '[profile p]\nbucket = %s/dochealthy\naccess_key = %s\nsecret_key = %s\npath_style = 1\nlist_v1 = %s\n' \
		"$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" "$v1" >"$JO_T/xdg$v1/jfsops/config"
	chmod 600 "$JO_T/xdg$v1/jfsops/config"
	rc=0
	env XDG_CONFIG_HOME="$JO_T/xdg$v1" ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		strace -f -qq -e trace=sendto,sendmsg,write -s 512 -o "$JO_T/list$v1.strace" \
		"$B" leakcheck "$GOOD" --profile p --min-age 0s >"$JO_T/list$v1.out" 2>&1 || rc=$?
	if [ $rc -gt 1 ]; then
		echo "FAIL list_v1=$v1: leakcheck exit $rc"; sed 's/^/    | /' "$JO_T/list$v1.out"; fails=$((fails + 1))
	elif ! grep -q 'GET /dochealthy[/?]' "$JO_T/list$v1.strace"; then
		echo "FAIL list_v1=$v1: no path-style LIST request seen"; fails=$((fails + 1))
	elif [ $v1 = 1 ] && grep -q 'list-type=2' "$JO_T/list$v1.strace"; then
		echo "FAIL list_v1=1: the profile's list_v1 did not reach leakcheck"; fails=$((fails + 1))
	elif [ $v1 = 0 ] && ! grep -q 'list-type=2' "$JO_T/list$v1.strace"; then
		echo "FAIL list_v1=0: no ListObjectsV2 request seen"; fails=$((fails + 1))
	else
		echo "ok   profile list_v1=$v1 reaches leakcheck"
	fi
done

if [ "$fails" -gt 0 ]; then
	echo "doctor: $fails failure(s)"
	exit 1
fi
echo "doctor: all cases ok"
