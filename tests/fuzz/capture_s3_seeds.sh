#!/usr/bin/env bash
# Capture real S3 XML replies from SeaweedFS and rclone serve s3 as seeds of
# the s3xml fuzz target (tests/fuzz/corpus/s3xml/). Not part of the suite:
# run it by hand when a server version changes, then review and commit the
# files. Usage: JO_PORT_BASE=N bash tests/fuzz/capture_s3_seeds.sh [OUTDIR]
# (default OUTDIR: tests/fuzz/corpus/s3xml). Needs the venv (tests/install.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
out=${1:-$here/corpus/s3xml}
mkdir -p "$out"
jo_setup

start_seaweed $((JO_PORT_BASE + 10))
start_rclone_s3 $((JO_PORT_BASE + 20))

# req NAME EP AK SK CURL-ARGS...: store the reply body as OUT/NAME.xml
req() {
	local name=$1 ep=$2 ak=$3 sk=$4
	shift 4
	jo_s3_curl "$ep" "$ak" "$sk" "$@" -o "$out/$name.xml" || jo_die "request $name failed"
	[ -s "$out/$name.xml" ] || { rm -f "$out/$name.xml"; jo_log "$name: empty body"; }
}

# body_curl EP AK SK BODY CURL-ARGS...: a signed request with a body (the
# payload hash header is what SeaweedFS and rclone check the body against).
body_curl() {
	local ep=$1 ak=$2 sk=$3 body=$4 sha
	shift 4
	sha=$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)
	jo_s3_curl "$ep" "$ak" "$sk" -H "x-amz-content-sha256: $sha" --data-binary "$body" "$@"
}

# breq NAME EP AK SK BODY CURL-ARGS...: req with a request body
breq() {
	local name=$1 ep=$2 ak=$3 sk=$4 body=$5
	shift 5
	body_curl "$ep" "$ak" "$sk" "$body" "$@" -o "$out/$name.xml" || jo_die "request $name failed"
}

# Keys with characters that need XML or URL escaping; each as its URL path.
keys=("vol/chunks/0/0/1_0_4194304" "vol/chunks/0/0/2_0_1024" "vol/a%20b%2Bc" "vol/%E2%82%AC%26%3C%3E"
	"vol/dir/x" "vol/dir/y" "vol/%25percent" "top")

capture() {
	local tag=$1 ep=$2 ak=$3 sk=$4 b=$5 k id etag body md5
	s3_mkbucket "$b" "$ep" "$ak" "$sk"
	for k in "${keys[@]}"; do
		body_curl "$ep" "$ak" "$sk" "data of $k" -X PUT -f "$ep/$b/$k" -o /dev/null || jo_die "$tag: PUT $k failed"
	done
	req "${tag}_list_v2_url" "$ep" "$ak" "$sk" "$ep/$b?encoding-type=url&list-type=2&max-keys=1000&prefix=vol%2F"
	req "${tag}_list_v2_plain" "$ep" "$ak" "$sk" "$ep/$b?list-type=2&prefix="
	req "${tag}_list_v2_delim" "$ep" "$ak" "$sk" "$ep/$b?delimiter=%2F&encoding-type=url&list-type=2&prefix=vol%2F"
	req "${tag}_list_v2_trunc" "$ep" "$ak" "$sk" "$ep/$b?encoding-type=url&list-type=2&max-keys=2&prefix="
	req "${tag}_list_v2_empty" "$ep" "$ak" "$sk" "$ep/$b?encoding-type=url&list-type=2&prefix=nothing%2F"
	req "${tag}_list_v1_trunc" "$ep" "$ak" "$sk" "$ep/$b?encoding-type=url&marker=vol%2Fa&max-keys=2&prefix="
	# SeaweedFS sends this NextMarker without URL-encoding it
	req "${tag}_list_v1_marker_pct" "$ep" "$ak" "$sk" "$ep/$b?encoding-type=url&max-keys=1&prefix=vol%2F"
	req "${tag}_list_v1_delim" "$ep" "$ak" "$sk" "$ep/$b?delimiter=%2F&prefix="
	req "${tag}_err_nosuchkey" "$ep" "$ak" "$sk" "$ep/$b/no/such/key"
	req "${tag}_err_nosuchbucket" "$ep" "$ak" "$sk" "$ep/no-such-bucket-x?list-type=2"
	jo_s3_curl "$ep" "$ak" "wrong-secret" "$ep/$b?list-type=2" -o "$out/${tag}_err_signature.xml" || true
	# multipart: create, upload one part, list parts, complete
	req "${tag}_mpu_create" "$ep" "$ak" "$sk" -X POST "$ep/$b/vol/big?uploads="
	id=$(sed -n 's:.*<UploadId>\([^<]*\)</UploadId>.*:\1:p' "$out/${tag}_mpu_create.xml")
	[ -n "$id" ] || jo_die "$tag: no UploadId in the CreateMultipartUpload reply"
	etag=$(body_curl "$ep" "$ak" "$sk" "part one" -X PUT -f -D - -o /dev/null \
		"$ep/$b/vol/big?partNumber=1&uploadId=$id" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: *//p')
	req "${tag}_mpu_list_uploads" "$ep" "$ak" "$sk" "$ep/$b?uploads="
	req "${tag}_mpu_list_parts" "$ep" "$ak" "$sk" "$ep/$b/vol/big?uploadId=$id"
	body="<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>$etag</ETag></Part></CompleteMultipartUpload>"
	breq "${tag}_mpu_complete" "$ep" "$ak" "$sk" "$body" -X POST "$ep/$b/vol/big?uploadId=$id"
	req "${tag}_mpu_list_parts_gone" "$ep" "$ak" "$sk" "$ep/$b/vol/big?uploadId=$id"
	# DeleteObjects with a quiet=false reply
	body="<Delete><Object><Key>top</Key></Object><Object><Key>vol/dir/x</Key></Object><Object><Key>no/such</Key></Object></Delete>"
	md5=$(printf '%s' "$body" | openssl dgst -md5 -binary | base64)
	breq "${tag}_delete_result" "$ep" "$ak" "$sk" "$body" -X POST -H "Content-MD5: $md5" \
		-H 'Content-Type: application/xml' "$ep/$b?delete="
	req "${tag}_list_buckets" "$ep" "$ak" "$sk" "$ep/"
}

capture seaweed "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" seeds
capture rclone "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK" seeds
ls -l "$out" >&2
