#!/usr/bin/env bash
# Build the lanceparse libFuzzer targets (clang -fsanitize=fuzzer,address,
# undefined) and run each for a bounded time (default 30 s, env
# FUZZ_SECONDS). Seeds: real manifests and data files written by pylance
# (tests/lance/make_datasets.py --small) when the venv has it, plus any
# files in tests/fuzz/corpus/<target>/. Exits non-zero when a target finds
# a crash, a leak or undefined behaviour.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${FUZZ_SECONDS:-30}
out=${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/jo-fuzz.XXXXXX")}
py=${JO_VENV:-$top/.venv}/bin/python
CC=${CC_FUZZ:-clang}
command -v "$CC" >/dev/null || { echo "run.sh: $CC is missing" >&2; exit 1; }
srcs=("$top"/lanceparse/pb.c "$top"/lanceparse/manifest.c "$top"/lanceparse/scan.c
      "$top"/lanceparse/ranges.c "$top"/lanceparse/io.c "$top"/common/err.c)
flags=(-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$top"
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)

mkdir -p "$out/seeds"
if [ -x "$py" ] && "$py" -c 'import lance' 2>/dev/null; then
	"$py" "$top/tests/lance/make_datasets.py" "$out/seeds/ds" --small >/dev/null 2>&1 || true
fi
rc=0
for t in pb manifest datafile; do
	bin="$out/fuzz_lance_$t"
	"$CC" "${flags[@]}" -o "$bin" "$top/tests/fuzz/fuzz_lance_$t.c" "${srcs[@]}"
	corpus="$out/corpus_$t"
	mkdir -p "$corpus"
	[ -d "$top/tests/fuzz/corpus/$t" ] && cp "$top/tests/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true
	if [ -d "$out/seeds/ds" ]; then
		case $t in
		pb|manifest)
			find "$out/seeds/ds" -name '*.manifest' -size -64k | head -20 |
				while read -r f; do cp "$f" "$corpus/$(basename "$(dirname "$(dirname "$f")")")_$(basename "$f")"; done ;;
		datafile)
			# First byte: 0x80 = v2 (low bits: minor), 0x00 = legacy.
			for d in "$out"/seeds/ds/ds_*; do
				v=$'\x81'; case $d in *legacy) v=$'\x00';; *2.0) v=$'\x80';; *2.2) v=$'\x82';; *2.3) v=$'\x83';; esac
				f=$(find "$d/data" -name '*.lance' -size -200k | head -1)
				[ -n "$f" ] && { printf '%s' "$v"; cat "$f"; } > "$corpus/$(basename "$d").seed"
			done ;;
		esac
	fi
	echo "fuzz: $t for ${secs}s ($(ls "$corpus" | wc -l) seeds)" >&2
	if ! "$bin" -max_total_time="$secs" -max_len=262144 -rss_limit_mb=1024 -timeout=10 \
		-print_final_stats=0 -artifact_prefix="$out/crash_$t-" "$corpus" >"$out/$t.log" 2>&1; then
		echo "fuzz: $t FAILED; see $out/$t.log and $out/crash_$t-*" >&2
		tail -30 "$out/$t.log" >&2
		rc=1
	else
		echo "fuzz: $t ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$out/$t.log" || grep -Eo '#[0-9]+' "$out/$t.log" | tail -1))" >&2
	fi
done
exit $rc
