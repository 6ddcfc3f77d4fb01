#!/bin/bash
# cli_unsigned_options.sh: every number of the command line refuses a sign,
# a leading blank and the other forms strtoull/strtod take (issue 26, item
# 9): `compact --min-slices -1` was 2^64-1, `--threads +4` and `--lease ' 5s'`
# passed, a duration or rate of 0x10, 1e3, inf or nan was a number. Each is
# a usage error (exit 2) naming the option, before anything is opened (the
# META-URL names no volume). Plain values still parse: the same commands
# get past their options and fail on the missing volume instead.
# No services.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/services.sh
. "$HERE/../lib/services.sh"
jo_setup
M=sqlite3://$JO_T/none.db
N=0

# bad CMD-ARGS...: each value below, put where the argument list says @,
# is refused with exit 2 and a line naming the option and the value
bad() {
	local v a rc opt args
	for v in -1 +1 ' 1' -0 '' "$@"; do
		args=()
		opt=
		for a in "${CMD[@]}"; do
			if [ "$a" = @ ]; then
				opt=${args[-1]}
				args+=("$v")
			else
				args+=("$a")
			fi
		done
		rc=0
		"$JO_BIN" "${args[@]}" >"$JO_T/out" 2>"$JO_T/err" </dev/null || rc=$?
		[ $rc = 2 ] || jo_die "jfsops ${args[*]}: exit $rc, want 2: $(cat "$JO_T/err")"
		grep -qF -- "$opt '$v'" "$JO_T/err" ||
			jo_die "jfsops ${args[*]}: the error names no \"$opt '$v'\": $(cat "$JO_T/err")"
		N=$((N + 1))
	done
}
# good CMD-ARGS...: the value is taken (the command goes on to the volume,
# which does not exist: any exit but 2)
good() {
	local rc=0
	"$JO_BIN" "$@" >"$JO_T/out" 2>"$JO_T/err" </dev/null || rc=$?
	[ $rc != 2 ] || jo_die "jfsops $*: a good value refused: $(cat "$JO_T/err")"
}

# integers
CMD=(compact "$M" --min-slices @); bad 18446744073709551616
good compact "$M" --min-slices 18446744073709551615
CMD=(compact "$M" --min-garbage @); bad
CMD=(compact "$M" --threads @); bad
CMD=(compact "$M" --task-size @); bad
CMD=(gc "$M" --threads @); bad
CMD=(gc "$M" --batch @); bad
CMD=(gc "$M" --task-size @); bad
CMD=(leakcheck "$M" --list-threads @); bad
CMD=(warmup "$M" --dry-run --threads @); bad
CMD=(warmup "$M" --follow --ahead @); bad
CMD=(lance /none --columns a --version @); bad 0x10
CMD=(sync /none/a /none/b --transfers @); bad
CMD=(sync /none/a /none/b --list-threads @); bad
CMD=(sync /none/a /none/b --part-concurrency @); bad
CMD=(sync /none/a /none/b --retries @); bad
CMD=(sync /none/a /none/b --max-delete @); bad
CMD=(sync /none/a /none/b --ranges @); bad
CMD=(sync /none/a /none/b --max-attempts @); bad
CMD=(cat "$M" /f --retries @); bad
good cat "$M" /f --retries 3
# sizes
CMD=(warmup "$M" --dry-run --mem-limit @); bad ' 64M' 18446744073709551616
CMD=(leakcheck "$M" --mem-limit @); bad 99999999999999999999
CMD=(leakcheck "$M" --synthetic @); bad
CMD=(lance /none --columns a --align @); bad
CMD=(lance /none --columns a --tail-block @); bad
CMD=(lance /none --columns a --merge-gap @); bad
CMD=(cat "$M" /f --offset @); bad
CMD=(cat "$M" /f --length @); bad
CMD=(sync /none/a /none/b --part-size @); bad nan inf 0x10
CMD=(sync /none/a /none/b --multipart-threshold @); bad nan
CMD=(sync /none/a /none/b --bwlimit @); bad nan
CMD=(sync /none/a /none/b --sort-mem @); bad nan
good cat "$M" /f --offset 1K --length 4096
# durations and rates
CMD=(gc "$M" --lease @); bad 0x10 1e3 inf nan ' 5s' 1e400
CMD=(gc "$M" --max-time @); bad 0x10 1e3 inf nan .5
CMD=(gc "$M" --delete-rate @); bad 0x10 1e3 inf nan
CMD=(compact "$M" --lease @); bad 0x10 nan
CMD=(compact "$M" --max-time @); bad 0x10 nan 99999999999999999999d
CMD=(leakcheck "$M" --min-age @); bad 0x10
CMD=(leakcheck "$M" --delete-from "$JO_T/none.txt" --delete-rate @); bad nan inf 0x10
CMD=(sync /none/a /none/b --lease @); bad nan
CMD=(sync /none/a /none/b --checkpoint @); bad nan
good gc "$M" --lease 1.5m --max-time 2h --delete-rate 0.5
good leakcheck "$M" --min-age 2h --delete-rate 10 --delete-from "$JO_T/none.txt"
jo_log "$N values refused with exit 2; plain values taken"
echo "ok cli_unsigned_options"
