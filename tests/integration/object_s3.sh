#!/usr/bin/env bash
# Integration test of common/object against a real SeaweedFS S3 endpoint
# (and rclone serve s3 for a second implementation):
# put/get/range/head/list (V2 and V1, paginated with pages that end on keys
# needing URL-encoding, start-after, delimiter),
# delete, batch delete, awkward keys, metadata, copy, multipart, create-only
# puts (If-None-Match honoured by SeaweedFS, ignored by rclone); wrong
# secret -> EAUTH, unreachable -> ECONNECT, missing bucket -> ESTATE.
#
# Ports: OBJ_PORT_BASE (default JO_PORT_BASE+10): SeaweedFS master +0, volume
# +1, filer +2, s3 +3 (gRPC +10000); rclone serve s3 +4.
#
# The driver is tests/tools/objtool.c; OBJTOOL names a built binary, else it
# is compiled here with cc against the sources.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup

base=${OBJ_PORT_BASE:-$((JO_PORT_BASE + 10))}
tool=${OBJTOOL:-}
if [ -z "$tool" ]; then
	tool=$JO_T/objtool
	cc -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -O2 -Wall -Wextra -Werror \
		-I"$JO_REPO" "$JO_REPO/tests/tools/objtool.c" "$JO_REPO"/common/object/*.c \
		"$JO_REPO/common/err.c" "$JO_REPO/common/cancel.c" "$JO_REPO/common/log.c" \
		"$JO_REPO/common/esc.c" "$JO_REPO/common/dynbuf.c" "$JO_REPO/common/pct.c" \
		"$JO_REPO/common/curlerr.c" \
		-o "$tool" -lcurl -lssl -lcrypto -lexpat -lpthread -lm
fi

fails=0
check() { # check NAME CMD...
	local name=$1
	shift
	if "$@"; then
		echo "ok   $name"
	else
		echo "FAIL $name"
		fails=$((fails + 1))
	fi
}

start_seaweed "$base" objak objsecret
ep=$JO_S3_ENDPOINT
export OBJ_AK=objak OBJ_SK=objsecret OBJ_RETRIES=2

check "seaweed selftest (ListObjectsV2)" "$tool" s3 "$ep/objt" selftest
check "seaweed selftest (ListObjects V1)" env OBJ_LIST_V1=1 "$tool" minio "$ep/objt1" selftest
check "seaweed selftest, 3 shards (objsh0..2)" env OBJ_SHARDS=3 "$tool" s3 "$ep/objsh%d" selftest
check "seaweed create-only, probed: If-None-Match honoured" "$tool" s3 "$ep/objt" create-only if-none-match probe/
check "seaweed create-only, unprobed: HEAD first" "$tool" s3 "$ep/objt" create-only head-then-put
check "seaweed create-only, 3 shards, probed" env OBJ_SHARDS=3 "$tool" s3 "$ep/objsh%d" create-only if-none-match probe/
check "seaweed missing key -> ENOTFOUND" "$tool" s3 "$ep/objt" expect ENOTFOUND head no/such/key
check "seaweed missing bucket -> ESTATE" "$tool" s3 "$ep/nobucket$$" expect ESTATE list
check "seaweed wrong secret -> EAUTH" env OBJ_SK=wrongsecret "$tool" s3 "$ep/objt" expect EAUTH head t/x
check "seaweed wrong access key -> EAUTH" env OBJ_AK=nosuchkey "$tool" s3 "$ep/objt" expect EAUTH list
check "unreachable -> ECONNECT" env OBJ_RETRIES=1 "$tool" s3 "http://127.0.0.1:9/objt" expect ECONNECT head t/x

start_rclone_s3 $((base + 4)) rcak rcsecret
check "rclone serve s3 selftest" env OBJ_NO_IFMATCH=1 OBJ_AK=rcak OBJ_SK=rcsecret "$tool" s3 "$JO_RS3_ENDPOINT/rbk" selftest
# rclone serve s3 ignores If-None-Match (it overwrites): the probe sees that, HEAD stays first
check "rclone create-only, probed: header ignored, HEAD first" env OBJ_AK=rcak OBJ_SK=rcsecret "$tool" s3 "$JO_RS3_ENDPOINT/rbk" create-only head-then-put probe/
check "rclone wrong secret -> EAUTH" env OBJ_AK=rcak OBJ_SK=bad "$tool" s3 "$JO_RS3_ENDPOINT/rbk" expect EAUTH head x

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed" >&2
	jo_tail "$JO_SEAWEED_LOG" 20
	exit 1
fi
echo "all object_s3 checks passed"
