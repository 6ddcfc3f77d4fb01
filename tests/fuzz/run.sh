#!/usr/bin/env bash
# Build the libFuzzer targets (clang -fsanitize=fuzzer,address,undefined)
# and run each for a bounded time. Exits non-zero when a target finds a
# crash, a leak, a hang, undefined behaviour or a broken invariant.
#
# Targets (tests/fuzz/fuzz_<name>.c, seeds in tests/fuzz/corpus/<name>/):
#   lance_pb lance_manifest lance_datafile   lanceparse (seeds also written
#                                            by pylance when the venv has it)
#   s3xml          every S3 XML reply parser of common/object/obj_xml.c
#   s3list_rt      ListBucketResult written like real servers, parsed back
#   config         the config file parser (common/config.c)
#   meta_url       META-URLs (jo_meta_url_parse)
#   sync_filter    sync's include/exclude rules and glob matching
#   warmup_ranges  warmup's --ranges lines, every form
#   jfs_values     what a volume stores: format record, attrs, slice records
#                  (and their visible segments), block keys and bodies, trash names
#   leak_run       a cluster leak check's reference run (its index, its
#                  frames) as a worker reads it from --work
#
# Environment: FUZZ_TARGETS (names, default all), FUZZ_SECONDS (per target,
# default 20), FUZZ_OUT (work directory, kept; default a new temp dir,
# removed when every target passed, kept with the crash inputs otherwise),
# CC_FUZZ (default clang), FUZZ_JOBS (parallel compiles, default 2).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${FUZZ_SECONDS:-20}
keep=${FUZZ_OUT:+1}
out=${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/jo-fuzz.XXXXXX")}
py=${JO_VENV:-$top/.venv}/bin/python
CC=${CC_FUZZ:-clang}
jobs=${FUZZ_JOBS:-2}
all="lance_pb lance_manifest lance_datafile s3xml s3list_rt config meta_url sync_filter warmup_ranges jfs_values leak_run"
targets=${FUZZ_TARGETS:-$all}
command -v "$CC" >/dev/null || { echo "run.sh: $CC is missing" >&2; exit 1; }
for t in $targets; do
	[ -f "$top/tests/fuzz/fuzz_$t.c" ] || { echo "run.sh: no target '$t' (known: $all)" >&2; exit 2; }
done

pkgs="libcurl openssl sqlite3 hiredis libzstd liblz4 jansson libarchive expat libpq libmariadb"
# shellcheck disable=SC2086
pc_cflags=$(pkg-config --cflags $pkgs)
# shellcheck disable=SC2086
pc_libs=$(pkg-config --libs $pkgs)
base=(-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DJO_VERSION='"fuzz"' -I"$top"
      -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
lance_srcs=("$top"/lanceparse/pb.c "$top"/lanceparse/manifest.c "$top"/lanceparse/scan.c
            "$top"/lanceparse/ranges.c "$top"/lanceparse/io.c "$top"/common/err.c
            "$top"/common/dynbuf.c)
mkdir -p "$out/seeds" "$out/obj"

# The library objects the non-lance targets link against (coverage-
# instrumented, sanitized), as one archive: the linker takes only what a
# target reaches.
lib=
need_lib() {
	[ -z "$lib" ] || return 0
	lib=$out/libjo_fuzz.a
	local srcs=() f o n=0 fail=0
	mapfile -t srcs < <(cd "$top" && find common -name '*.c' | sort)
	srcs+=(sync/filter.c trash/trash_parse.c leakcheck/runfile.c leakcheck/work.c
	       leakcheck/merge.c leakcheck/density.c leakcheck/range.c)
	echo "fuzz: compiling ${#srcs[@]} library sources" >&2
	for f in "${srcs[@]}"; do
		o=$out/obj/$(echo "$f" | tr / _).o
		# shellcheck disable=SC2086
		"$CC" "${base[@]}" $pc_cflags -fsanitize=fuzzer-no-link,address,undefined \
			-c "$top/$f" -o "$o" &
		n=$((n + 1))
		if [ $n -ge "$jobs" ]; then
			wait -n || fail=1
			n=$((n - 1))
		fi
	done
	while [ $n -gt 0 ]; do
		wait -n || fail=1
		n=$((n - 1))
	done
	[ $fail = 0 ] || { echo "fuzz: library build failed" >&2; exit 1; }
	rm -f "$lib"
	ar rcs "$lib" "$out"/obj/*.o
}

rc=0
for t in $targets; do
	bin="$out/fuzz_$t"
	case $t in
	lance_*)
		"$CC" "${base[@]}" -fsanitize=fuzzer,address,undefined -o "$bin" \
			"$top/tests/fuzz/fuzz_$t.c" "${lance_srcs[@]}" ;;
	*)
		need_lib
		# shellcheck disable=SC2086
		"$CC" "${base[@]}" $pc_cflags -fsanitize=fuzzer,address,undefined -o "$bin" \
			"$top/tests/fuzz/fuzz_$t.c" "$lib" $pc_libs -lpthread -lm ;;
	esac
	corpus="$out/corpus_$t"
	mkdir -p "$corpus"
	if [ -d "$top/tests/fuzz/corpus/$t" ]; then
		cp "$top/tests/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
	fi
	if [ "$t" = lance_pb ] || [ "$t" = lance_manifest ] || [ "$t" = lance_datafile ]; then
		if [ ! -d "$out/seeds/ds" ] && [ -x "$py" ] && "$py" -c 'import lance' 2>/dev/null; then
			"$py" "$top/tests/lance/make_datasets.py" "$out/seeds/ds" --small >/dev/null 2>&1 || true
		fi
		if [ -d "$out/seeds/ds" ]; then
			case $t in
			lance_pb|lance_manifest)
				find "$out/seeds/ds" -name '*.manifest' -size -64k | head -20 |
					while read -r f; do cp "$f" "$corpus/$(basename "$(dirname "$(dirname "$f")")")_$(basename "$f")"; done ;;
			lance_datafile)
				# First byte: 0x80 = v2 (low bits: minor), 0x00 = legacy.
				for d in "$out"/seeds/ds/ds_*; do
					v=$'\x81'; case $d in *legacy) v=$'\x00';; *2.0) v=$'\x80';; *2.2) v=$'\x82';; *2.3) v=$'\x83';; esac
					f=$(find "$d/data" -name '*.lance' -size -200k | head -1)
					[ -n "$f" ] && { printf '%s' "$v"; cat "$f"; } > "$corpus/$(basename "$d").seed"
				done ;;
			esac
		fi
	fi
	maxlen=4096
	case $t in lance_*) maxlen=262144 ;; s3xml|s3list_rt) maxlen=65536 ;; esac
	dict=()
	[ -f "$top/tests/fuzz/$t.dict" ] && dict=(-dict="$top/tests/fuzz/$t.dict")
	echo "fuzz: $t for ${secs}s ($(find "$corpus" -type f | wc -l) seeds)" >&2
	if ! "$bin" -max_total_time="$secs" -max_len="$maxlen" -rss_limit_mb=1024 -timeout=10 \
		-print_final_stats=1 "${dict[@]}" -artifact_prefix="$out/crash_$t-" "$corpus" \
		>"$out/$t.log" 2>&1; then
		echo "fuzz: $t FAILED; see $out/$t.log and $out/crash_$t-*" >&2
		tail -40 "$out/$t.log" >&2
		rc=1
	else
		echo "fuzz: $t ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$out/$t.log" | grep -o '[0-9]*$') runs, $(grep -Eo 'cov: [0-9]+' "$out/$t.log" | tail -1))" >&2
	fi
done
if [ $rc = 0 ] && [ -z "$keep" ]; then
	rm -rf "$out"
fi
exit $rc
