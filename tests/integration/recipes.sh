#!/usr/bin/env bash
# The cron and systemd recipes of docs/operations.md ("Running it in production"),
# run as written against real services: each recipe is extracted from the
# markdown between its <!-- recipe: ... --> markers (tests/tools/recipes.py),
# the example addresses are replaced by those of a test volume, and the
# command lines are run the way cron (/bin/sh -c, minimal environment, \% ->
# %) and systemd (ExecStart= with Environment=/EnvironmentFile=) run them.
# Unit files are checked with `systemd-analyze verify` (else parsed for the
# required keys). Metrics files are validated with prometheus_client.
# A recipe whose command or flag the binary lacks FAILS (never skipped).
#
# JO_RECIPES_MD=FILE reads the recipes from FILE instead of docs/operations.md.
# Ports: JO_PORT_BASE +0 (redis), +10..+13 (SeaweedFS), +4 (rclone serve s3),
# +30.. (juicefs metrics).
JO_PORT_BASE=${JO_PORT_BASE:-9660}
. "$(dirname "$0")/lib/init.sh"
B=$JO_BIN
PY=$JO_VENV/bin/python
MD=${JO_RECIPES_MD:-$JO_REPO/docs/operations.md}
[ -f "$MD" ] || jo_die "no $MD"

start_redis "${JO_RECIPES_REDIS:-$((JO_PORT_BASE + 0))}"
start_seaweed "${JO_RECIPES_SEAWEED:-$((JO_PORT_BASE + 10))}"
start_rclone_s3 "${JO_RECIPES_RCLONE:-$((JO_PORT_BASE + 4))}"

# the test volume
META="redis://127.0.0.1:$JO_REDIS_PORT/1"
s3_mkbucket recvol
jfs_format "$META" "$JO_S3_ENDPOINT/recvol" recvol --trash-days 0
mkdir -p "$JO_T/src/a"
for i in 1 2 3; do head -c $((i * 70000)) /dev/urandom >"$JO_T/src/a/f$i"; done
jfs_sync_in "$JO_T/src" "$META"
# the two sides of the sync recipe
s3_mkbucket train-data
s3_mkbucket train-backup "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK"
for i in 1 2 3 4; do
	head -c $((i * 1000)) /dev/urandom >"$JO_T/obj$i"
	"$PY" "$JO_REPO/tests/tools/s3util.py" put "$JO_S3_ENDPOINT" "$JO_S3_AK" "$JO_S3_SK" \
		train-data "shard/obj$i" "$JO_T/obj$i" >/dev/null
done

# substitutions: the recipes' example addresses -> this test bed, per host
subst() { # HOST
	local h=$JO_T/$1
	mkdir -p "$h/textfile" "$h/log" "$h/lib/leakcheck" "$h/lock" "$JO_T/etc/jfsops"
	printf '%s\t%s\n' \
		/usr/local/bin/jfsops "$B" \
		redis://10.0.0.5:6379/1 "$META" \
		redis://10.0.0.5:6379/5 "redis://127.0.0.1:$JO_REDIS_PORT/5" \
		/etc/jfsops "$JO_T/etc/jfsops" \
		/var/lib/node_exporter/textfile "$h/textfile" \
		/var/log/jfsops "$h/log" \
		/var/lib/jfsops "$h/lib" \
		/run/lock "$h/lock" \
		http://10.0.0.7:8333 "$JO_S3_ENDPOINT" \
		SRC_ACCESS_KEY "$JO_S3_AK" \
		SRC_SECRET_KEY "$JO_S3_SK" \
		http://10.0.0.8:9000 "$JO_RS3_ENDPOINT" \
		DST_ACCESS_KEY "$JO_RS3_AK" \
		DST_SECRET_KEY "$JO_RS3_SK" >"$JO_T/subst-$1"
	mkdir -p "$JO_T/r-$1"
	"$PY" "$JO_REPO/tests/tools/recipes.py" "$MD" "$JO_T/r-$1" "$JO_T/subst-$1" ||
		jo_die "cannot extract the recipes from $MD"
}
subst hostA
subst hostB
R=$JO_T/r-hostA
echo "recipes in $MD:"
sed 's/^/  /' "$R/index"

fails=0
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# synced_objects: how many objects the backup bucket (rclone serve s3) holds,
# when it lists the same keys and sizes as the source bucket and is not empty;
# else status 1.
synced_objects() {
	local src dst
	src=$(s3_list_keys train-data | awk '{print $1, $2}' | sort)
	dst=$(s3_list_keys train-backup "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK" | awk '{print $1, $2}' | sort)
	[ "$src" = "$dst" ] && [ -n "$src" ] && echo "$src" | wc -l
}
need() { grep -q "^$1 " "$R/index" || bad "$1: no such recipe in $MD"; }
for r in config gc-cron gc-service gc-timer leakcheck-cron sync-cron sync-cluster-cron; do need "$r"; done

# cron_run RECIPE HOST N: run job N of a crontab recipe as cron would
cron_run() {
	local dir=$JO_T/r-$2 envs=() line job
	while IFS= read -r line; do envs+=("$line"); done <"$dir/$1.env"
	job=$(sed -n "${3}p" "$dir/$1.jobs")
	mkdir -p "$JO_T/home"
	env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$JO_T/home" SHELL=/bin/sh LOGNAME=jfsops \
		"${envs[@]}" /bin/sh -c "$job"
}

# prom COMMAND FILE
prom() {
	if [ ! -s "$2" ]; then
		bad "$1: no metrics file $2"
	elif ! "$PY" "$JO_REPO/tests/tools/promcheck.py" "$1" "$2"; then
		bad "$1: metrics file $2 is not valid"
	fi
}
# nolog_errors RECIPE LOG: the command did not reject its own command line
nolog_errors() {
	if [ -f "$2" ] && grep -iE "unknown option|unrecognized option|is not a jfsops command|usage:" "$2" >/dev/null; then
		bad "$1: the command line as written is refused: $(grep -iE 'unknown option|unrecognized option|is not a jfsops command|usage' "$2" | head -n 2 | tr '\n' ' ')"
	fi
}

# ---- config
cfg=$JO_T/etc/jfsops/config
cp "$R/config" "$cfg"
chmod 600 "$cfg"
if out=$("$B" config show --config "$cfg" --profile src 2>&1); then
	echo "$out" | grep -q "$JO_S3_ENDPOINT" || bad "config: show does not print the src endpoint"
	echo "$out" | grep -qF -- "$JO_S3_SK" && bad "config: show prints the secret key unmasked"
	# not even a prefix of it: the value column is exactly ****
	echo "$out" | grep -qE '^secret_key +\*\*\*\* ' || bad "config: show does not print the secret key as **** only: $(echo "$out" | grep '^secret_key')"
	echo "ok   config (config show --profile src)"
else
	bad "config: jfsops config show refuses the recipe's file: $out"
fi
chmod 644 "$cfg"
if "$B" config show --config "$cfg" --profile src >/dev/null 2>"$JO_T/loose.err"; then
	bad "config: a secret-holding file readable by others was accepted"
fi
chmod 600 "$cfg"

# ---- gc from cron on two hosts at once
rcA=0 rcB=0
cron_run gc-cron hostA 1 & pA=$!
cron_run gc-cron hostB 1 & pB=$!
wait $pA || rcA=$?
wait $pB || rcB=$?
for h in hostA:$rcA hostB:$rcB; do
	host=${h%%:*} rc=${h#*:}
	nolog_errors "gc-cron ($host)" "$JO_T/$host/log/gc.log"
	if [ "$rc" = 0 ] && tail -n 1 "$JO_T/$host/log/gc.log" | grep -q '; tasks-left$'; then
		# finished while the other host still held tasks by lease: said so, exit 0
		echo "ok   gc-cron ($host): done while the other host still worked (exit 0, tasks-left)"
	elif [ "$rc" != 0 ]; then
		bad "gc-cron ($host): exit $rc"; sed 's/^/    | /' "$JO_T/$host/log/gc.log" 2>/dev/null | tail -n 5
	else
		echo "ok   gc-cron ($host)"
	fi
	prom gc "$JO_T/$host/textfile/jfsops_gc.prom"
done
# with both done, the next run has nothing left to wait for
rc=0
cron_run gc-cron hostA 1 || rc=$?
[ "$rc" = 0 ] || { bad "gc-cron: a run after both hosts finished: exit $rc"; tail -n 3 "$JO_T/hostA/log/gc.log"; }
# flock -n: while a run holds the host's lock, the next one is skipped at once
flock "$JO_T/hostA/lock/jfsops-gc.lock" sleep 8 & lk=$!
sleep 0.5
rm -f "$JO_T/hostA/textfile/jfsops_gc.prom"
start=$SECONDS rc=0
cron_run gc-cron hostA 1 || rc=$?
[ "$rc" = 1 ] && [ $((SECONDS - start)) -lt 5 ] && [ ! -e "$JO_T/hostA/textfile/jfsops_gc.prom" ] ||
	bad "gc-cron: a second run on the same host was not skipped by flock -n (exit $rc)"
kill "$lk" 2>/dev/null; wait "$lk" 2>/dev/null || true

# ---- gc as a systemd service + timer
units=$JO_T/units
mkdir -p "$units"
cp "$R/gc-service" "$units/jfsops-gc.service"
cp "$R/gc-timer" "$units/jfsops-gc.timer"
# Documentation=man:jfsops-gc(1) is checked against the generated man pages
bash "$JO_REPO/tests/tools/gen_man.sh" "$B" "$JO_T/man/man1" || bad "gen_man.sh failed"
if command -v systemd-analyze >/dev/null; then
	if ! MANPATH=$JO_T/man systemd-analyze verify "$units/jfsops-gc.service" "$units/jfsops-gc.timer" >"$JO_T/verify.out" 2>&1; then
		bad "gc-service/gc-timer: systemd-analyze verify: $(tr '\n' ' ' <"$JO_T/verify.out")"
	elif grep -v "Failed to .*bus\|Cannot find unit" "$JO_T/verify.out" | grep -q .; then
		bad "gc-service/gc-timer: systemd-analyze verify warns: $(tr '\n' ' ' <"$JO_T/verify.out")"
	else
		echo "ok   gc-service/gc-timer (systemd-analyze verify)"
	fi
else
	for k in '^\[Service\]' '^Type=oneshot' '^ExecStart=/' '^KillSignal=SIGTERM'; do
		grep -q "$k" "$units/jfsops-gc.service" || bad "gc-service: no $k"
	done
	for k in '^\[Timer\]' '^OnCalendar=' '^\[Install\]' '^WantedBy=timers.target'; do
		grep -q "$k" "$units/jfsops-gc.timer" || bad "gc-timer: no $k"
	done
fi
# ExecStart with the unit's environment, the way systemd runs it (no shell)
echo "META_PASSWORD=" >"$JO_T/etc/jfsops/env"
chmod 600 "$JO_T/etc/jfsops/env"
mapfile -t svc_env < <(sed -n 's/^Environment=//p' "$units/jfsops-gc.service")
ef=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$units/jfsops-gc.service")
[ -n "$ef" ] && [ -f "$ef" ] && mapfile -t -O "${#svc_env[@]}" svc_env < <(grep -E '^[A-Za-z_]+=' "$ef")
exec_start=$(sed -n 's/^ExecStart=//p' "$units/jfsops-gc.service")
rm -f "$JO_T/hostA/textfile/jfsops_gc.prom"
rc=0
"$PY" - "$exec_start" >"$JO_T/exec.args" <<'PYEOF' || rc=$?
import shlex, sys
print("\0".join(shlex.split(sys.argv[1])), end="")
PYEOF
mapfile -d '' -t argv <"$JO_T/exec.args"
env -i PATH=/usr/bin:/bin HOME="$JO_T/home" "${svc_env[@]}" "${argv[@]}" >"$JO_T/svc.out" 2>&1 || rc=$?
nolog_errors gc-service "$JO_T/svc.out"
if [ "$rc" = 0 ]; then echo "ok   gc-service ExecStart"; else bad "gc-service: ExecStart exit $rc: $(tail -n 3 "$JO_T/svc.out" | tr '\n' ' ')"; fi
prom gc "$JO_T/hostA/textfile/jfsops_gc.prom"

# ---- nightly leakcheck dry run, report kept
rc=0
cron_run leakcheck-cron hostA 1 || rc=$?
nolog_errors leakcheck-cron "$JO_T/hostA/log/leakcheck.log"
report=$JO_T/hostA/lib/leakcheck/leaks-$(date +%F).jsonl
[ "$rc" = 0 ] || bad "leakcheck-cron: exit $rc"
if [ -f "$report" ]; then
	"$PY" -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$report" ||
		bad "leakcheck-cron: $report is not JSON lines"
	echo "ok   leakcheck-cron report $(basename "$report")"
else
	bad "leakcheck-cron: no report $report ($(tail -n 2 "$JO_T/hostA/log/leakcheck.log" 2>/dev/null | tr '\n' ' '))"
fi
prom leakcheck "$JO_T/hostA/textfile/jfsops_leakcheck.prom"
# old reports are pruned, the new one kept
touch -d '40 days ago' "$JO_T/hostA/lib/leakcheck/leaks-2000-01-01.jsonl"
cron_run leakcheck-cron hostA 1 || true
[ -e "$JO_T/hostA/lib/leakcheck/leaks-2000-01-01.jsonl" ] && bad "leakcheck-cron: a 40-day-old report was not pruned"

# ---- hourly sync
rc=0
cron_run sync-cron hostA 1 || rc=$?
nolog_errors sync-cron "$JO_T/hostA/log/sync.log"
if [ "$rc" = 0 ]; then
	if n=$(synced_objects); then
		echo "ok   sync-cron ($n objects in sync)"
	else
		bad "sync-cron: destination differs from source after the run"
	fi
else
	bad "sync-cron: exit $rc: $(tail -n 3 "$JO_T/hostA/log/sync.log" 2>/dev/null | tr '\n' ' ')"
fi
prom sync "$JO_T/hostA/textfile/jfsops_sync.prom"

# ---- sync on many hosts: the same cron file on two hosts at once
# (DST emptied first, so that the job has everything to copy)
s3_list_keys train-backup "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK" | while read -r k _; do
	"$PY" "$JO_REPO/tests/tools/s3util.py" delete "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK" \
		train-backup "$k" >/dev/null
done
[ -z "$(s3_list_keys train-backup "$JO_RS3_ENDPOINT" "$JO_RS3_AK" "$JO_RS3_SK")" ] ||
	bad "sync-cluster-cron: could not empty the destination first"
rcA=0 rcB=0
cron_run sync-cluster-cron hostA 1 & pA=$!
cron_run sync-cluster-cron hostB 1 & pB=$!
wait $pA || rcA=$?
wait $pB || rcB=$?
for h in hostA:$rcA hostB:$rcB; do
	host=${h%%:*} rc=${h#*:}
	nolog_errors "sync-cluster-cron ($host)" "$JO_T/$host/log/sync-cluster.log"
	if [ "$rc" = 0 ]; then
		echo "ok   sync-cluster-cron ($host)"
	else
		bad "sync-cluster-cron ($host): exit $rc: $(tail -n 3 "$JO_T/$host/log/sync-cluster.log" 2>/dev/null | tr '\n' ' ')"
	fi
	f=$JO_T/$host/textfile/jfsops_sync_cluster.prom
	prom sync "$f"
	grep -q '^jfsops_sync_last_run_copied_objects{job="[^"]*",worker="' "$f" 2>/dev/null ||
		bad "sync-cluster-cron ($host): metrics without a worker label"
done
if n=$(synced_objects); then
	echo "ok   sync-cluster-cron: two hosts synced $n objects"
else
	bad "sync-cluster-cron: destination differs from source after the run"
fi
# the next run of the day finds the job finished
rc=0
cron_run sync-cluster-cron hostA 1 || rc=$?
[ "$rc" = 0 ] && tail -n 2 "$JO_T/hostA/log/sync-cluster.log" | grep -q "is finished" &&
	echo "ok   sync-cluster-cron: a later run says the job is finished" ||
	bad "sync-cluster-cron: a later run: exit $rc: $(tail -n 2 "$JO_T/hostA/log/sync-cluster.log" | tr '\n' ' ')"

if [ "$fails" -gt 0 ]; then
	echo "recipes: $fails failure(s)"
	exit 1
fi
echo "recipes: all ok"
