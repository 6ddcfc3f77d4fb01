#!/usr/bin/env bash
# jfsops leakcheck --restore never overwrites and never writes outside its
# volume, on SQLite + file, SQLite + SeaweedFS S3 (hash prefix; it honours
# If-None-Match) and SQLite + rclone serve s3 (it ignores the header, so a
# HEAD comes first). Forged archives are built with python tarfile + zstd:
#   (a) a block that metadata references, with other bytes: the object is
#       unchanged (sha256), `jfsops cat` returns the file's bytes, the
#       summary says kept: exists (kept_exists 1, restored 0);
#   (b) a valid free key of the volume first, then a key of another volume,
#       '../', an absolute path, a non-block key, the other layout's key, a
#       symlink or a hard link entry: exit 2, one error line, and the bucket
#       listing (file: the directory around the bucket too) is unchanged;
#       a damaged archive is refused before writing too (exit 7);
#   (c) a real quarantine round trip: --delete-from --quarantine, --restore
#       puts the objects back byte for byte ("restored" in the audit), and a
#       second --restore keeps them all ("kept: exists" in the audit), with
#       create_check "link" / "if-none-match" / "head-then-put".
# Ports: SeaweedFS JO_PORT_BASE+10..13 (+10000), rclone serve s3 +20,
# juicefs metrics from +30.
export JO_PORT_BASE=${JO_PORT_BASE:-9480}
. "$(dirname "$0")/lib/init.sh"

PY=$JO_VENV/bin/python
TOOL="$PY $JO_REPO/tests/integration/lib/restore_tool.py"
S3U="$PY $JO_REPO/tests/tools/s3util.py"

# ---- the store of the current variant: RS_KIND file (RS_ROOT/objs) or s3 (RS_EP RS_AK RS_SK RS_BUCKET)
rs_put() { # KEY FILE
	if [ "$RS_KIND" = file ]; then
		mkdir -p "$(dirname "$RS_ROOT/objs/$1")"
		cp "$2" "$RS_ROOT/objs/$1"
	else
		$S3U put "$RS_EP" "$RS_AK" "$RS_SK" "$RS_BUCKET" "$1" "$2"
	fi
}
rs_get() { # KEY > stdout
	if [ "$RS_KIND" = file ]; then
		cat "$RS_ROOT/objs/$1"
	else
		$S3U get "$RS_EP" "$RS_AK" "$RS_SK" "$RS_BUCKET" "$1"
	fi
}
rs_has() { # KEY: the object exists
	if [ "$RS_KIND" = file ]; then
		[ -f "$RS_ROOT/objs/$1" ]
	else
		$S3U list "$RS_EP" "$RS_AK" "$RS_SK" "$RS_BUCKET" "$1" | awk -v k="$1" '$1 == k {f = 1} END {exit !f}'
	fi
}
# everything in the bucket ("key size etag"); file: everything around the bucket too
rs_listing() {
	if [ "$RS_KIND" = file ]; then
		(cd "$RS_ROOT" && find . -printf '%p %s %y %l\n' | sort)
		# nothing planted through a traversal next to the test's directory either
		find "$JO_T" -maxdepth 1 -printf '%p %y\n' | sort
	else
		$S3U list "$RS_EP" "$RS_AK" "$RS_SK" "$RS_BUCKET" | sort
	fi
}
rs_key() { $TOOL key "$RS_NAME" "$RS_HP" "$@"; }
jget() { jq -r "select(.type == \"summary\") | .$2" "$1"; }

# rs_refused CASE ARCHIVE-ENTRY...: the archive (a good free key first) is
# refused whole: exit 2, one line on stderr, nothing written.
rs_refused() {
	local case=$1
	shift
	$TOOL tar "$d/bad-$case.tar.zst" "file:$good_key:$d/good.bin" "$@"
	rs_refused_archive "$case" "$d/bad-$case.tar.zst" 2
}
rs_refused_archive() { # CASE ARCHIVE EXIT
	local case=$1 ar=$2 want=$3 before after rc=0
	before=$(rs_listing | sha256sum)
	"$JO_BIN" leakcheck "$RS_META" --restore "$ar" --json >"$d/bad-$case.json" 2>"$d/bad-$case.err" || rc=$?
	after=$(rs_listing | sha256sum)
	[ "$before" = "$after" ] || { cat "$d/bad-$case.err" >&2; jo_die "[$RS_NAME] $case: the restore wrote something (listing changed)"; }
	rs_has "$good_key" && jo_die "[$RS_NAME] $case: the good entry before the bad one was written"
	[ $rc = "$want" ] || { cat "$d/bad-$case.err" >&2; jo_die "[$RS_NAME] $case: exit $rc, expected $want"; }
	[ "$(wc -l <"$d/bad-$case.err")" = 1 ] || { cat "$d/bad-$case.err" >&2; jo_die "[$RS_NAME] $case: not one error line"; }
	grep -q 'nothing restored' "$d/bad-$case.err" || { cat "$d/bad-$case.err" >&2; jo_die "[$RS_NAME] $case: the error does not say nothing was restored"; }
	[ ! -s "$d/bad-$case.json" ] || jo_die "[$RS_NAME] $case: a summary was printed"
	echo "[$RS_NAME] refused: $case: $(cat "$d/bad-$case.err")" >&2
}

# rs_variant: the volume RS_NAME on RS_META (SQLite file RS_DB), formatted already
rs_variant() {
	d=$JO_T/$RS_NAME
	mkdir -p "$d/src"
	local rc base key i ref_key before after

	# a volume with two files (1 MiB blocks: f1 is 3 blocks, f2 one)
	head -c 2500000 /dev/urandom >"$d/src/f1"
	head -c 100000 /dev/urandom >"$d/src/f2"
	jfs_sync_in "$d/src" "$RS_META"
	ref_key=$(rs_listing | awk '{print $1}' | sed 's#^\./objs/##' | grep "^$RS_NAME/chunks/.*_1_1048576\$" | head -1)
	[ -n "$ref_key" ] || jo_die "[$RS_NAME] no second block of f1 in the bucket"
	# room below the slice counter for unreferenced ids (leaks, free keys)
	base=$(sqlite3 "$RS_DB" "SELECT value FROM jfs_counter WHERE name = 'nextChunk'")
	[ -n "$base" ] || jo_die "[$RS_NAME] no nextChunk counter in $RS_DB"
	sqlite3 "$RS_DB" "UPDATE jfs_counter SET value = value + 100000 WHERE name = 'nextChunk'"

	# (a) a forged archive holding a referenced block with other bytes
	before=$(rs_get "$ref_key" | sha256sum)
	head -c 1048576 /dev/urandom >"$d/forged.bin"
	$TOOL tar "$d/forged.tar.zst" "file:$ref_key:$d/forged.bin"
	rc=0
	"$JO_BIN" leakcheck "$RS_META" --restore "$d/forged.tar.zst" --json >"$d/forged.json" 2>"$d/forged.err" || rc=$?
	cat "$d/forged.err" >&2
	after=$(rs_get "$ref_key" | sha256sum)
	[ "$before" = "$after" ] || jo_die "[$RS_NAME] (a) the restore overwrote the referenced block $ref_key"
	"$JO_BIN" cat "$RS_META" /f1 | cmp -s - "$d/src/f1" || jo_die "[$RS_NAME] (a) jfsops cat /f1 does not return the file's bytes"
	[ $rc = 0 ] || jo_die "[$RS_NAME] (a) restore exit $rc"
	[ "$(jget "$d/forged.json" kept_exists)" = 1 ] && [ "$(jget "$d/forged.json" restored)" = 0 ] ||
		jo_die "[$RS_NAME] (a) summary: $(cat "$d/forged.json")"
	grep -q '1 kept: exists' "$d/forged.err" || jo_die "[$RS_NAME] (a) stderr summary does not say kept: exists"
	[ "$(jget "$d/forged.json" create_check)" = "$RS_CHECK" ] ||
		jo_die "[$RS_NAME] (a) create_check $(jget "$d/forged.json" create_check), expected $RS_CHECK"

	# (b) refused before anything is written
	good_key=$(rs_key $((base + 2000)) 0 7)
	printf 'goodbye' >"$d/good.bin"
	local other=otherv layout=1
	[ "$RS_HP" = 1 ] && layout=0
	rs_refused other-volume "file:$($TOOL key "$other" "$RS_HP" $((base + 2001)) 0 7):$d/good.bin"
	rs_refused dotdot "file:../$(rs_key $((base + 2002)) 0 7):$d/good.bin"
	rs_refused dotdot-inside "file:$RS_NAME/chunks/../../escaped/$((base + 2003))_0_7:$d/good.bin"
	rs_refused absolute "file:/$(rs_key $((base + 2004)) 0 7):$d/good.bin"
	rs_refused not-a-block "file:$RS_NAME/chunks/0/0/notablock:$d/good.bin"
	rs_refused other-layout "file:$($TOOL key "$RS_NAME" "$layout" $((base + 2005)) 0 7):$d/good.bin"
	rs_refused symlink "symlink:$(rs_key $((base + 2006)) 0 7):/etc/passwd"
	rs_refused hardlink "hardlink:$(rs_key $((base + 2007)) 0 7):$good_key"
	# two good, incompressible entries, the archive cut in the second: refused whole
	head -c 300000 /dev/urandom >"$d/big.bin"
	$TOOL tar "$d/cut.tar.zst" "file:$good_key:$d/big.bin" "file:$(rs_key $((base + 2008)) 0 300000):$d/big.bin"
	truncate -s 450000 "$d/cut.tar.zst"
	rs_refused_archive damaged "$d/cut.tar.zst" 7

	# (c) a real quarantine round trip, then again over the objects it put back
	: >"$d/cands.jsonl"
	for i in 1 2 3; do
		key=$(rs_key $((base + 1000 + i)) 0 $((1000 + i)))
		head -c $((1000 + i)) /dev/urandom >"$d/leak$i.bin"
		rs_put "$key" "$d/leak$i.bin"
		printf '{"type":"leaked","key":"%s","slice":%d,"size":%d,"reason":"unreferenced"}\n' \
			"$key" $((base + 1000 + i)) $((1000 + i)) >>"$d/cands.jsonl"
	done
	sleep 2 # older than --min-age 1s
	rc=0
	"$JO_BIN" leakcheck "$RS_META" --delete-from "$d/cands.jsonl" --min-age 1s \
		--quarantine "$d/q.tar.zst" --audit "$d/del-audit.jsonl" --json >"$d/del.json" 2>"$d/del.err" || rc=$?
	cat "$d/del.err" >&2
	[ $rc = 0 ] && [ "$(jget "$d/del.json" deleted)" = 3 ] || jo_die "[$RS_NAME] (c) --delete-from exit $rc: $(cat "$d/del.json")"
	for i in 1 2 3; do
		rs_has "$(rs_key $((base + 1000 + i)) 0 $((1000 + i)))" && jo_die "[$RS_NAME] (c) leak $i not deleted"
	done
	rc=0
	"$JO_BIN" leakcheck "$RS_META" --restore "$d/q.tar.zst" --audit "$d/rest-audit.jsonl" --json \
		>"$d/rest.json" 2>"$d/rest.err" || rc=$?
	cat "$d/rest.err" >&2
	[ $rc = 0 ] || jo_die "[$RS_NAME] (c) restore exit $rc"
	[ "$(jget "$d/rest.json" restored)" = 3 ] && [ "$(jget "$d/rest.json" kept_exists)" = 0 ] ||
		jo_die "[$RS_NAME] (c) restore summary: $(cat "$d/rest.json")"
	for i in 1 2 3; do
		rs_get "$(rs_key $((base + 1000 + i)) 0 $((1000 + i)))" | cmp -s - "$d/leak$i.bin" ||
			jo_die "[$RS_NAME] (c) leak $i not restored byte for byte"
	done
	[ "$(grep -c '"reason":"restore","result":"restored"' "$d/rest-audit.jsonl")" = 3 ] ||
		jo_die "[$RS_NAME] (c) audit: not 3 restored lines"
	rc=0
	"$JO_BIN" leakcheck "$RS_META" --restore "$d/q.tar.zst" --audit "$d/rest-audit.jsonl" --json \
		>"$d/rest2.json" 2>"$d/rest2.err" || rc=$?
	cat "$d/rest2.err" >&2
	[ $rc = 0 ] && [ "$(jget "$d/rest2.json" restored)" = 0 ] && [ "$(jget "$d/rest2.json" kept_exists)" = 3 ] ||
		jo_die "[$RS_NAME] (c) second restore exit $rc: $(cat "$d/rest2.json")"
	[ "$(grep -c '"result":"kept: exists"' "$d/rest-audit.jsonl")" = 3 ] ||
		jo_die "[$RS_NAME] (c) audit: not 3 kept: exists lines"
	[ "$(jget "$d/rest2.json" create_check)" = "$RS_CHECK" ] ||
		jo_die "[$RS_NAME] (c) create_check $(jget "$d/rest2.json" create_check), expected $RS_CHECK"
	"$JO_BIN" cat "$RS_META" /f1 | cmp -s - "$d/src/f1" || jo_die "[$RS_NAME] /f1 changed"
	"$JO_BIN" cat "$RS_META" /f2 | cmp -s - "$d/src/f2" || jo_die "[$RS_NAME] /f2 changed"
	echo "[$RS_NAME] restore: ok" >&2
}

# 1. SQLite + file
RS_KIND=file RS_NAME=rsfile RS_HP=0 RS_CHECK=link
RS_ROOT=$JO_T/froot RS_DB=$JO_T/rsfile.db RS_META="sqlite3://$JO_T/rsfile.db"
jfs_format "$RS_META" "$RS_ROOT/objs" "$RS_NAME" --block-size 1M --trash-days 0
rs_variant

# 2. SQLite + SeaweedFS (honours If-None-Match), hash prefix
start_seaweed $((JO_PORT_BASE + 10))
s3_mkbucket rsweed
RS_KIND=s3 RS_NAME=rsweed RS_HP=1 RS_CHECK=if-none-match
RS_EP=$JO_S3_ENDPOINT RS_AK=$JO_S3_AK RS_SK=$JO_S3_SK RS_BUCKET=rsweed
RS_DB=$JO_T/rsweed.db RS_META="sqlite3://$JO_T/rsweed.db"
jfs_format "$RS_META" "$RS_EP/$RS_BUCKET" "$RS_NAME" --block-size 1M --trash-days 0 --hash-prefix
rs_variant

# 3. SQLite + rclone serve s3 (ignores If-None-Match: HEAD first)
start_rclone_s3 $((JO_PORT_BASE + 20))
s3_mkbucket rsrcl "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK"
RS_KIND=s3 RS_NAME=rsrcl RS_HP=0 RS_CHECK=head-then-put
RS_EP=$JO_RS3_ENDPOINT RS_AK=$JO_RS3_AK RS_SK=$JO_RS3_SK RS_BUCKET=rsrcl
RS_DB=$JO_T/rsrcl.db RS_META="sqlite3://$JO_T/rsrcl.db"
jfs_format "$RS_META" "$RS_EP/$RS_BUCKET" "$RS_NAME" --block-size 1M --trash-days 0 \
	--access-key "$RS_AK" --secret-key "$RS_SK"
rs_variant

echo "leakcheck restore safe: ok"
